//! The HTTP face of the webhooks: decode, decide, encode. Nothing here makes a decision.

use std::sync::Arc;
use std::time::Instant;

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use crate::telemetry::Metrics;
use crate::telemetry::metrics::{Webhook, WebhookResult};

use super::decide::{bad_request, too_large};
use super::lanes::{self, Lanes};
use super::limits::{MAX_LOGGED_BYTES, truncate};
use super::review::{self, DecodeError, Request, Verdict};
use super::{Admission, MUTATE_PATH, VALIDATE_PATH};

#[derive(Clone)]
struct Shared {
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    lanes: Lanes,
}

/// The webhook routes, with metrics of their own (for tests and the standalone server's
/// callers that do not expose metrics).
pub fn router(admission: Arc<Admission>) -> Router {
    router_with_metrics(admission, Arc::new(Metrics::new()))
}

pub fn router_with_metrics(admission: Arc<Admission>, metrics: Arc<Metrics>) -> Router {
    router_with(admission, metrics, Lanes::default())
}

pub fn router_with(admission: Arc<Admission>, metrics: Arc<Metrics>, lanes: Lanes) -> Router {
    Router::new()
        .route(MUTATE_PATH, post(mutate))
        .route(VALIDATE_PATH, post(validate))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(Shared {
            admission,
            metrics,
            lanes,
        })
}

async fn mutate(State(shared): State<Shared>, request: axum::extract::Request) -> Response {
    serve(shared, "mutate", request, Admission::mutate).await
}

async fn validate(State(shared): State<Shared>, request: axum::extract::Request) -> Response {
    serve(shared, "validate", request, Admission::validate).await
}

/// One review through its lane: read, decode, decide and encode on a blocking thread.
async fn serve(
    shared: Shared,
    webhook: &'static str,
    request: axum::extract::Request,
    decide: fn(&Admission, &Request) -> Verdict,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let Shared {
        admission,
        metrics,
        lanes,
    } = shared;
    lanes
        .run(declared, request.into_body(), move |body| {
            measured(&metrics, webhook, || {
                answer(&body, |req| decide(&admission, req))
            })
        })
        .await
}

fn measured(
    metrics: &Metrics,
    webhook: &'static str,
    handle: impl FnOnce() -> (Response, &'static str),
) -> Response {
    let start = Instant::now();
    let (response, result) = handle();
    metrics
        .admission_duration
        .get_or_create(&Webhook { webhook })
        .observe(start.elapsed().as_secs_f64());
    metrics
        .admission_requests
        .get_or_create(&WebhookResult { webhook, result })
        .inc();
    response
}

/// Decodes, decides and encodes one review, and says how it went (allowed, denied or error).
/// A review we cannot answer in kind (no uid, not JSON, wrong apiVersion) gets a 400 with a
/// Kubernetes Status saying why.
pub fn answer(body: &[u8], decide: impl FnOnce(&Request) -> Verdict) -> (Response, &'static str) {
    let review = match review::decode(body) {
        Ok(r) => r,
        Err(DecodeError::Exceeded(exceeded)) => {
            tracing::warn!(%exceeded, bytes = body.len(), "refused an AdmissionReview over the limits");
            let status = too_large(exceeded);
            return match review::identify(body) {
                Some((api_version, uid)) => {
                    encoded(&api_version, &uid, &Verdict::deny(status), "denied")
                }
                None => (
                    status_response(StatusCode::PAYLOAD_TOO_LARGE, &status),
                    "error",
                ),
            };
        }
        Err(e) => {
            tracing::warn!(error = %e, "rejected an undecodable AdmissionReview");
            return (
                status_response(StatusCode::BAD_REQUEST, &bad_request(&e.to_string())),
                "error",
            );
        }
    };
    let verdict = decide(&review.request);
    if !verdict.allowed {
        let message = verdict
            .status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .unwrap_or_default();
        // `message` is the log line's own key: the denial reason goes under `reason`, cut to a
        // bounded length.
        let reason = truncate(message, MAX_LOGGED_BYTES);
        tracing::info!(uid = %review.request.uid, operation = %review.request.operation, name = %review.request.name, %reason, "denied");
    }
    let result = if verdict.allowed { "allowed" } else { "denied" };
    encoded(&review.api_version, &review.request.uid, &verdict, result)
}

fn encoded(
    api_version: &str,
    uid: &str,
    verdict: &Verdict,
    result: &'static str,
) -> (Response, &'static str) {
    match review::encode(api_version, uid, verdict) {
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
    lanes::status(
        code,
        status.reason.as_deref().unwrap_or_default(),
        status.message.as_deref().unwrap_or_default(),
    )
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
