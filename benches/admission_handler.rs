//! The admission handler alone (decode, schema check, rules, merge, patch, encode) for a typical
//! mutate request, and the validate path for the same object. Run: `cargo bench --bench admission_handler`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kubevirt_operator::admission::{Admission, routes};
use kubevirt_operator::machine::Catalog;

/// The seed's custom-vm, as kube-apiserver sends it on CREATE (shared with scripts/bench-webhook.sh).
const MUTATE_REQUEST: &str = include_str!("data/mutate-request.json");

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
}

criterion_group!(benches, bench);
criterion_main!(benches);
