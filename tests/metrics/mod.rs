//! Reading Prometheus text and the Grafana dashboard, for `tests/metrics_e2e.rs`: which metric
//! families an exposition declares, which metric names the dashboard's queries use, and the
//! checks of issue 24 that compare them with a running operator's `/metrics`.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

/// Every `# TYPE name kind` of the exposition, as (name, kind).
pub fn families(text: &str) -> BTreeSet<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let (name, kind) = l.split_once(' ')?;
            Some((name.to_owned(), kind.trim().to_owned()))
        })
        .collect()
}

/// Whether the exposition exports `name` as a query writes it: a family by its own name, a
/// counter by `_total`, a histogram by `_bucket`, `_count` or `_sum`.
pub fn exported(text: &str, name: &str) -> bool {
    families(text).iter().any(|(family, kind)| {
        let suffixes: &[&str] = match kind.as_str() {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_count", "_sum"],
            _ => &[""],
        };
        name == family
            || suffixes
                .iter()
                .any(|s| name.strip_suffix(s) == Some(family.as_str()))
    })
}

/// Every string under a key named `expr`, `query` or `definition` (panel targets and template
/// variables), anywhere in the dashboard.
fn queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, sub) in map {
                match (k.as_str(), sub) {
                    ("expr" | "query" | "definition", Value::String(q)) => out.push(q.clone()),
                    _ => queries(sub, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| queries(i, out)),
        _ => {}
    }
}

/// The `kubevirt_operator_*` names the dashboard's queries use, and how many queries it has.
pub fn dashboard_metrics(dashboard: &Value) -> (BTreeSet<String>, usize) {
    let mut all = Vec::new();
    queries(dashboard, &mut all);
    let mut names = BTreeSet::new();
    for q in &all {
        let mut rest = q.as_str();
        while let Some(at) = rest.find("kubevirt_operator_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.insert(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    (names, all.len())
}

/// The sample lines of metric `name` (a histogram by its `_count`) that carry every label.
pub fn samples<'a>(text: &'a str, name: &str, labels: &[&str]) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|k| l.contains(&format!("{k}=\""))))
        .collect()
}

/// Issue 24: every metric the Grafana dashboard queries (panels and variables) is one this
/// running operator exports; the chart's and the kustomize component's dashboards are one file.
pub fn dashboard_queries_name_exported_metrics(text: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
    let chart = read("charts/kubevirt-operator/files/grafana-dashboard.json");
    assert_eq!(
        chart,
        read("manifests/grafana/kubevirt-operator-dashboard.json"),
        "copy the chart's dashboard to manifests/grafana/"
    );
    let dashboard: Value = serde_json::from_str(&chart).expect("dashboard JSON");
    let (names, queries) = dashboard_metrics(&dashboard);
    assert!(
        queries >= 14 && names.len() >= 12,
        "{queries} queries, {names:?}"
    );
    let missing: Vec<&String> = names.iter().filter(|n| !exported(text, n)).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, not exported:\n{text}"
    );
    // The check can fail: a name the operator does not export is caught.
    assert!(!exported(text, "kubevirt_operator_machines_missing_total"));
    assert!(!exported(
        text,
        "kubevirt_operator_admission_requests_bucket"
    ));
}

/// The standalone `webhook` command: the same admission and certificate metric families as
/// `run`, with samples once it has answered a review and loaded its certificate files.
pub async fn the_webhook_command_exports_the_same_admission_and_certificate_metrics(
    run_text: &str,
) {
    let ca = crate::common::TestCa::new("metrics test CA");
    let server = Stopped(crate::common::WebhookProcess::start(&ca));
    let server = &server.0;
    let answer: Value = ca
        .reqwest_client()
        .post(format!(
            "https://{}{}",
            server.addr,
            kubevirt_operator::admission::VALIDATE_PATH
        ))
        .json(&crate::common::valid_review("metrics"))
        .send()
        .await
        .expect("a review")
        .json()
        .await
        .expect("JSON");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let mut invalid = crate::common::valid_review("metrics-denied");
    invalid["request"]["object"]["spec"]["template"] = json!("gigantic");
    let denied: Value = ca
        .reqwest_client()
        .post(format!(
            "https://{}{}",
            server.addr,
            kubevirt_operator::admission::MUTATE_PATH
        ))
        .json(&invalid)
        .send()
        .await
        .expect("a review")
        .json()
        .await
        .expect("JSON");
    assert_eq!(denied["response"]["allowed"], false, "{denied}");
    let url = format!("http://{}/metrics", server.metrics);
    let mut text = String::new();
    for _ in 0..50 {
        text = reqwest::get(&url)
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("body");
        if text.contains("certificate=\"served\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Rotations, reloads of the serving Secret and problems with the certificate objects are
    // the self-managed mode's (the leader's): a file-served process has none to report, `run
    // --cert-file` included.
    let self_managed = [
        "kubevirt_operator_certificate_rotations",
        "kubevirt_operator_certificate_reloads",
        "kubevirt_operator_certificate_problems",
    ];
    let ours = |t: &str| -> Vec<(String, String)> {
        families(t)
            .into_iter()
            .filter(|(n, _)| {
                (n.starts_with("kubevirt_operator_admission_")
                    || n.starts_with("kubevirt_operator_certificate_"))
                    && !self_managed.contains(&n.as_str())
            })
            .collect()
    };
    assert_eq!(ours(&text), ours(run_text), "webhook vs run");
    assert_eq!(ours(&text).len(), 4, "{text}");
    assert!(
        text.contains(
            "kubevirt_operator_certificate_expiry_timestamp_seconds{certificate=\"served\"}"
        ),
        "{text}"
    );
    assert!(
        samples(
            &text,
            "kubevirt_operator_admission_requests_total",
            &["webhook", "result"]
        )
        .iter()
        .any(|l| l.contains("result=\"allowed\"")),
        "{text}"
    );
}

/// Kills the webhook process when the check ends, failed or not.
struct Stopped(crate::common::WebhookProcess);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}
