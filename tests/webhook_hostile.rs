//! Hostile bodies against the real `kubevirt-operator webhook` process: each is answered in
//! bounded time with a bounded answer, the process stays within bounded memory, a normal
//! admission and /healthz keep answering while such bodies arrive back to back, and SIGTERM
//! still stops the process.
//!
//! Before the limits, 600,000 invalid bootOrder entries got no answer within 120 s (the
//! decision ran on the async workers, comparing every schema error with every rule error), and
//! 40,000 invalid disks came back as a 37.5 MB answer with 80,000 causes.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{TestCa, WebhookProcess, valid_review};
use kubevirt_operator::admission::{MUTATE_PATH, VALIDATE_PATH};
use serde_json::{Value, json};

/// Generous bounds for a loaded 2-core CI machine; the failures they catch were minutes and
/// hundreds of MiB.
const ANSWERED_WITHIN: Duration = Duration::from_secs(20);
const NORMAL_WITHIN: Duration = Duration::from_secs(3);
/// Attempts at a body answered 503 (saturated) before the test gives up.
const SATURATED_RETRIES: u32 = 5;
const PEAK_RSS_BELOW_MIB: u64 = 96;

fn review_with_spec(spec: Value) -> Vec<u8> {
    let mut review = valid_review("hostile");
    review["request"]["object"]["spec"] = spec;
    serde_json::to_vec(&review).expect("encode")
}

/// `depth` arrays around a number, as text: serde_json would refuse to build a Value this deep.
fn nested_text(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// Within every size bound, so every rule runs: 256 disks with three errors each.
const MANY_ERRORS: &str = "256 disks with three errors each";

/// Every hostile shape, named, as the bytes sent.
fn hostile_bodies() -> Vec<(&'static str, Vec<u8>)> {
    let deep = String::from_utf8(review_with_spec(json!({"bootOrder": "DEEP"})))
        .expect("utf-8")
        .replace("\"DEEP\"", &nested_text(200_000))
        .into_bytes();
    let many_fields: serde_json::Map<String, Value> =
        (0..120_000).map(|i| (format!("f{i}"), json!(i))).collect();
    vec![
        (
            "600000 invalid bootOrder entries",
            review_with_spec(json!({"bootOrder": vec!["x"; 600_000]})),
        ),
        (
            "40000 invalid disks",
            review_with_spec(json!({"disks": (0..40_000)
                .map(|i| json!({"name": format!("Bad_{i}"), "size": "-1"}))
                .collect::<Vec<_>>()})),
        ),
        (
            "5000 invalid disks",
            review_with_spec(json!({"disks": (0..5_000)
                .map(|i| json!({"name": format!("Bad_{i}"), "size": "-1"}))
                .collect::<Vec<_>>()})),
        ),
        (
            MANY_ERRORS,
            review_with_spec(json!({"disks": (0..256)
                .map(|i| json!({"name": format!("Bad_{i}"), "size": "-1", "accessMode": "All"}))
                .collect::<Vec<_>>()})),
        ),
        (
            "3000 invalid networks",
            review_with_spec(json!({"networks": (0..3_000)
                .map(|i| json!({"name": format!("N{i}"), "networkName": "", "macAddress": "zz"}))
                .collect::<Vec<_>>()})),
        ),
        ("200000-deep nesting", deep),
        (
            "120000 fields",
            review_with_spec(Value::Object(many_fields)),
        ),
        (
            "a 2.5 MiB string",
            review_with_spec(json!({"cloudInit": {"userData": "x".repeat(2_500_000)}})),
        ),
    ]
}

fn client(ca: &TestCa) -> reqwest::Client {
    ca.reqwest_client()
}

fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib / 1024)
        .expect("VmHWM")
}

async fn post(client: &reqwest::Client, url: &str, body: Vec<u8>) -> (u16, String) {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: no answer: {e:?}"));
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// The answer's causes and message, bounded whatever the body held.
fn assert_bounded(what: &str, status: u16, body: &str) {
    assert!(
        body.len() < 64 * 1024,
        "{what}: answer of {} bytes",
        body.len()
    );
    let json: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
    match status {
        200 => {
            let response = &json["response"];
            assert_eq!(response["allowed"], false, "{what}: {body}");
            let causes = response["status"]["details"]["causes"]
                .as_array()
                .map_or(0, Vec::len);
            assert!(causes <= 101, "{what}: {causes} causes");
            let message = response["status"]["message"].as_str().unwrap_or_default();
            assert!(!message.is_empty(), "{what}: the denial says why");
            assert!(
                message.len() <= 17 * 1024,
                "{what}: message of {} bytes",
                message.len()
            );
        }
        400 | 413 => assert!(
            json["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: {body}"
        ),
        // Saturated: the designed answer past the budget, never a hang or a 500.
        503 => assert_eq!(json["reason"], "ServiceUnavailable", "{what}: {body}"),
        other => panic!("{what}: HTTP {other}: {body}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_bodies_get_bounded_answers_in_bounded_time_and_memory() {
    let ca = TestCa::new("hostile CA");
    let mut process = WebhookProcess::start(&ca);
    let client = client(&ca);
    let base = format!("https://{}", process.addr);
    for (what, body) in hostile_bodies() {
        assert!(
            body.len() <= 3 * 1024 * 1024,
            "{what}: {} bytes",
            body.len()
        );
        for path in [MUTATE_PATH, VALIDATE_PATH] {
            // A 503 past the answer budget is the lane's designed answer while the machine is
            // saturated (docs/design/admission.md), and a client retries it: on a CI machine running
            // several test binaries at once, the nice-19 large lane can starve for seconds
            // (and keeps its one permit until the starved decision ends). Every attempt must
            // answer in time and bounded; a 503 that outlasts the retries is still bounded.
            let mut attempts = 0;
            let (status, answer) = loop {
                attempts += 1;
                let start = Instant::now();
                let (status, answer) = post(&client, &format!("{base}{path}"), body.clone()).await;
                let took = start.elapsed();
                assert!(
                    took < ANSWERED_WITHIN,
                    "{what} on {path}: answered after {took:?}"
                );
                eprintln!(
                    "{what} on {path}: HTTP {status} in {took:?}, answer of {} bytes",
                    answer.len()
                );
                if status == 503 && answer.contains("saturated") && attempts < SATURATED_RETRIES {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    continue;
                }
                break (status, answer);
            };
            assert_bounded(&format!("{what} on {path}"), status, &answer);
        }
    }
    // The many-errors path reports 100 causes and counts the rest.
    let (_, answer) = post(
        &client,
        &format!("{base}{VALIDATE_PATH}"),
        hostile_bodies()
            .into_iter()
            .find_map(|(what, body)| (what == MANY_ERRORS).then_some(body))
            .expect("the many-errors body"),
    )
    .await;
    let json: Value = serde_json::from_str(&answer).expect("JSON");
    let causes = json["response"]["status"]["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(causes.len(), 101, "{answer:.2000}");
    assert!(
        causes[100]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("and ") && m.ends_with("more errors not shown")),
        "{:?}",
        causes[100]
    );
    let peak = peak_rss_mib(process.child.id());
    eprintln!("peak RSS of the webhook process: {peak} MiB");
    assert!(peak < PEAK_RSS_BELOW_MIB, "peak RSS {peak} MiB");
    process.sigterm();
    assert!(process.wait_for_exit("SIGTERM stops the webhook").success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn normal_admissions_and_probes_are_answered_under_a_stream_of_hostile_bodies() {
    let ca = TestCa::new("hostile stream CA");
    let mut process = WebhookProcess::start(&ca);
    let probe_addr = process.probes;
    let client = client(&ca);
    let base = format!("https://{}", process.addr);
    let stop = Arc::new(AtomicBool::new(false));
    let bodies = Arc::new(hostile_bodies());
    // Four senders, each sending the largest shapes back to back.
    let senders: Vec<_> = (0..4)
        .map(|n| {
            let (client, base, stop, bodies) =
                (client.clone(), base.clone(), stop.clone(), bodies.clone());
            tokio::spawn(async move {
                let mut sent = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let body = bodies[(n + sent) % bodies.len()].1.clone();
                    let _ = client
                        .post(format!("{base}{MUTATE_PATH}"))
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await;
                    sent += 1;
                }
                sent
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let plain = reqwest::Client::new();
    for i in 0..20 {
        let start = Instant::now();
        let (status, answer) = post(
            &client,
            &format!("{base}{MUTATE_PATH}"),
            serde_json::to_vec(&valid_review(&format!("normal-{i}"))).expect("encode"),
        )
        .await;
        let took = start.elapsed();
        assert_eq!(status, 200, "normal admission {i}: {answer}");
        let json: Value = serde_json::from_str(&answer).expect("JSON");
        assert_eq!(json["response"]["allowed"], true, "{answer}");
        assert!(took < NORMAL_WITHIN, "normal admission {i} took {took:?}");

        let start = Instant::now();
        let health = plain
            .get(format!("http://{probe_addr}/healthz"))
            .timeout(NORMAL_WITHIN)
            .send()
            .await
            .unwrap_or_else(|e| panic!("/healthz {i}: {e:?}"));
        assert_eq!(health.status(), 200);
        assert!(start.elapsed() < NORMAL_WITHIN);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut hostile = 0;
    for sender in senders {
        hostile += sender.await.expect("sender");
    }
    assert!(
        hostile >= 8,
        "the hostile senders kept the server busy ({hostile} sent)"
    );
    let peak = peak_rss_mib(process.child.id());
    eprintln!("peak RSS of the webhook process: {peak} MiB");
    assert!(peak < PEAK_RSS_BELOW_MIB, "peak RSS {peak} MiB");
    process.sigterm();
    assert!(
        process
            .wait_for_exit("SIGTERM under hostile load")
            .success()
    );
}
