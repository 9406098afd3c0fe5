use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use serde_json::{Value, json};
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt;

use super::*;
use crate::access::AccessReviewer;
use crate::admission::lanes::LaneSettings;
use crate::machine::Catalog;

fn review(spec: Value) -> Vec<u8> {
    let kind = json!({"group": "vitistack.io", "version": "v1alpha1", "kind": "Machine"});
    let object = json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                        "metadata": {"name": "vm", "namespace": "team-a"}, "spec": spec});
    let request = json!({"uid": "u1", "kind": kind, "name": "vm", "namespace": "team-a",
                         "operation": "CREATE", "userInfo": {"username": "bob"},
                         "object": object});
    json!({"apiVersion": review::V1, "kind": "AdmissionReview", "request": request})
        .to_string()
        .into_bytes()
}

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The denial's message goes into the log line under `reason`, cut at 2 KiB.
#[test]
fn a_denial_is_logged_with_its_reason_cut_at_2_kib() {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::Registry::default().with(
        crate::telemetry::logging::json_layer(move || writer.clone()),
    );
    let message = "x".repeat(10_000);
    let (_, result) = tracing::subscriber::with_default(subscriber, || {
        answer(&review(json!({})), |_| {
            Verdict::deny(Status {
                message: Some(message.clone()),
                ..Default::default()
            })
        })
    });
    assert_eq!(result, "denied");
    let logged = buffer.0.lock().expect("buffer").clone();
    let line: Value = serde_json::from_slice(logged.trim_ascii()).expect("one JSON line");
    assert_eq!(MAX_LOGGED_BYTES, 2048);
    assert_eq!(
        line["reason"],
        format!("{}... (7952 more bytes)", &message[..2048])
    );
    assert_eq!(line["message"], "denied");
}

/// An API server that never answers: the access check ends at the request's deadline, the
/// same one the lanes counted from its arrival, and the Machine is refused (fail closed).
#[tokio::test]
async fn the_access_check_ends_at_the_answers_budget() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = silent.local_addr().expect("address").port();
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().expect("url"));
    let reviewer = AccessReviewer::new(kube::Client::try_from(config).expect("client"));
    let admission = Admission::new(Catalog::default()).expect("schema");
    let budget = Duration::from_millis(500);
    let lanes = Lanes::new(LaneSettings {
        answer_within: budget,
        ..LaneSettings::default()
    });
    let app = router_with(
        Arc::new(admission.with_access(reviewer)),
        Arc::new(Metrics::new()),
        lanes,
    );
    let body = review(json!({"cloudInit": {"secretRef": {"name": "boot"}}}));
    let request = axum::http::Request::post(VALIDATE_PATH)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, body.len())
        .body(Body::from(body))
        .expect("request");
    let started = Instant::now();
    let response = app.oneshot(request).await.expect("an answer");
    let took = started.elapsed();
    assert!(took >= budget && took < budget * 5, "{took:?}");
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await;
    let answer: Value = serde_json::from_slice(&bytes.expect("body")).expect("a review");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 500);
    let message = answer["response"]["status"]["message"].as_str();
    assert!(
        message.is_some_and(|m| m.starts_with("cannot check whether the author may use")),
        "{message:?}"
    );
    drop(silent);
}
