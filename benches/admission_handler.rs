//! The admission handler alone (decode, schema check, rules, merge, patch, encode) for a typical
//! mutate request, and the validate path for the same object; then the costliest bodies that
//! are still decided on the async worker that read them (`LaneSettings::inline`). Run:
//! `cargo bench --bench admission_handler`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kubevirt_operator::admission::lanes::LaneSettings;
use kubevirt_operator::admission::{Admission, routes};
use kubevirt_operator::machine::Catalog;
use serde_json::{Value, json};

/// The seed's custom-vm, as kube-apiserver sends it on CREATE (shared with scripts/bench-webhook.sh).
const MUTATE_REQUEST: &str = include_str!("data/mutate-request.json");

/// The review with as many items made by `item` in `spec[field]` as fit in `bound` bytes.
fn largest_within(bound: usize, field: &str, item: impl Fn(usize) -> Value) -> Vec<u8> {
    let with = |n: usize| {
        let mut review: Value = serde_json::from_str(MUTATE_REQUEST).expect("JSON");
        review["request"]["object"]["spec"][field] = (0..n).map(&item).collect();
        serde_json::to_vec(&review).expect("encode")
    };
    let n = (0..)
        .take_while(|&n| with(n).len() <= bound)
        .last()
        .unwrap_or(0);
    with(n)
}

fn bench(c: &mut Criterion) {
    let admission = Admission::new(Catalog::default()).expect("schema compiles");
    let body = MUTATE_REQUEST.as_bytes();
    c.bench_function(
        "mutate handler (decode, check, merge, patch, encode)",
        |b| b.iter(|| routes::answer(black_box(body), |req| admission.mutate(req))),
    );
    c.bench_function("validate handler (decode, check, rules, encode)", |b| {
        b.iter(|| routes::answer(black_box(body), |req| admission.validate(req)))
    });
    let inline = LaneSettings::default().inline;
    let costliest = [
        (
            "valid disks, a patch for each",
            largest_within(
                inline,
                "disks",
                |i| json!({"name": format!("d{i}"), "size": "1Gi"}),
            ),
        ),
        (
            "disks with three errors each",
            largest_within(
                inline,
                "disks",
                |i| json!({"name": format!("Bad_{i}"), "size": "-1", "accessMode": "All"}),
            ),
        ),
        (
            "networks with three errors each",
            largest_within(
                inline,
                "networks",
                |i| json!({"name": format!("N{i}"), "networkName": "", "macAddress": "zz"}),
            ),
        ),
    ];
    for (what, body) in costliest {
        let name = format!("mutate, {} bytes: {what}", body.len());
        c.bench_function(&name, |b| {
            b.iter(|| routes::answer(black_box(&body), |req| admission.mutate(req)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
