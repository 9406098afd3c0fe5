//! The HTTP face of the webhooks: decode, decide, encode. Nothing here makes a decision.

use std::sync::Arc;
use std::time::Instant;

use axum::{
    Router,
    body::Bytes,
    extract::{DefaultBodyLimit, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use crate::telemetry::Metrics;
use crate::telemetry::metrics::{Webhook, WebhookResult};

use super::decide::bad_request;
use super::review::{self, Request, Verdict};
use super::{Admission, MUTATE_PATH, NETWORK_VALIDATE_PATH, VALIDATE_PATH};

/// kube-apiserver's own limit for a request body.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

#[derive(Clone)]
struct Shared {
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
}

/// The webhook routes, with metrics of their own (for tests and the standalone server's
/// callers that do not expose metrics).
pub fn router(admission: Arc<Admission>) -> Router {
    router_with_metrics(admission, Arc::new(Metrics::new()))
}

pub fn router_with_metrics(admission: Arc<Admission>, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(MUTATE_PATH, post(mutate))
        .route(VALIDATE_PATH, post(validate))
        .route(NETWORK_VALIDATE_PATH, post(validate_network))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Shared { admission, metrics })
}

async fn mutate(State(shared): State<Shared>, body: Bytes) -> Response {
    measured(&shared.metrics, "mutate", || {
        answer(&body, |req| shared.admission.mutate(req))
    })
}

async fn validate(State(shared): State<Shared>, body: Bytes) -> Response {
    let Some(reviewer) = shared.admission.access() else {
        return measured(&shared.metrics, "validate", || {
            answer(&body, |req| shared.admission.validate(req))
        });
    };
    // The rules first (no API call for a Machine they refuse), then the access check as the
    // author, which waits on kube-apiserver.
    let start = Instant::now();
    let (response, result) = match decode_or_reject(&body) {
        Err(rejected) => *rejected,
        Ok(review) => {
            let verdict = shared.admission.validate(&review.request);
            let verdict = super::access::check(reviewer, &review.request, verdict).await;
            respond(&review, &verdict)
        }
    };
    record(&shared.metrics, "validate", start, result);
    response
}

async fn validate_network(State(shared): State<Shared>, body: Bytes) -> Response {
    measured(&shared.metrics, "validate-networkconfiguration", || {
        answer(&body, |req| shared.admission.validate_network(req))
    })
}

fn measured(
    metrics: &Metrics,
    webhook: &'static str,
    handle: impl FnOnce() -> (Response, &'static str),
) -> Response {
    let start = Instant::now();
    let (response, result) = handle();
    record(metrics, webhook, start, result);
    response
}

fn record(metrics: &Metrics, webhook: &'static str, start: Instant, result: &'static str) {
    metrics
        .admission_duration
        .get_or_create(&Webhook { webhook })
        .observe(start.elapsed().as_secs_f64());
    metrics
        .admission_requests
        .get_or_create(&WebhookResult { webhook, result })
        .inc();
}

/// Decodes, decides and encodes one review, and says how it went (allowed, denied or error).
/// A review we cannot answer in kind (no uid, not JSON, wrong apiVersion) gets a 400 with a
/// Kubernetes Status saying why.
pub fn answer(body: &[u8], decide: impl FnOnce(&Request) -> Verdict) -> (Response, &'static str) {
    match decode_or_reject(body) {
        Ok(review) => {
            let verdict = decide(&review.request);
            respond(&review, &verdict)
        }
        Err(rejected) => *rejected,
    }
}

fn decode_or_reject(body: &[u8]) -> Result<review::Review, Box<(Response, &'static str)>> {
    review::decode(body).map_err(|e| {
        tracing::warn!(error = %e, "rejected an undecodable AdmissionReview");
        Box::new((
            status_response(StatusCode::BAD_REQUEST, &bad_request(&e.to_string())),
            "error",
        ))
    })
}

/// Logs a denial and encodes the verdict in the review's own apiVersion.
fn respond(review: &review::Review, verdict: &Verdict) -> (Response, &'static str) {
    if !verdict.allowed {
        let message = verdict
            .status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .unwrap_or_default();
        tracing::info!(uid = %review.request.uid, operation = %review.request.operation, name = %review.request.name, %message, "denied");
    }
    let result = if verdict.allowed { "allowed" } else { "denied" };
    match review::encode(&review.api_version, &review.request.uid, verdict) {
        Ok(bytes) => (
            ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
            result,
        ),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode AdmissionReview response");
            (StatusCode::INTERNAL_SERVER_ERROR.into_response(), "error")
        }
    }
}

fn status_response(code: StatusCode, status: &Status) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": status.message,
        "reason": status.reason,
        "code": code.as_u16(),
    });
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn method_not_allowed() -> Response {
    let msg = format!(
        "method not allowed: the webhooks take POST {MUTATE_PATH} and POST {VALIDATE_PATH}"
    );
    let status = Status {
        message: Some(msg),
        reason: Some("MethodNotAllowed".into()),
        ..Default::default()
    };
    let mut response = status_response(StatusCode::METHOD_NOT_ALLOWED, &status);
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    response
}

async fn not_found() -> Response {
    let msg = format!("not found: the webhooks are POST {MUTATE_PATH} and POST {VALIDATE_PATH}");
    status_response(
        StatusCode::NOT_FOUND,
        &Status {
            message: Some(msg),
            reason: Some("NotFound".into()),
            ..Default::default()
        },
    )
}
