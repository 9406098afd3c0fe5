//! The HTTP face of the webhooks: decode, decide, encode. Nothing here makes a decision.

use std::sync::Arc;

use axum::{
    Router,
    body::Bytes,
    extract::{DefaultBodyLimit, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use super::decide::bad_request;
use super::review::{self, Request, Verdict};
use super::{Admission, MUTATE_PATH, VALIDATE_PATH};

/// kube-apiserver's own limit for a request body.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

pub fn router(admission: Arc<Admission>) -> Router {
    Router::new()
        .route(MUTATE_PATH, post(mutate))
        .route(VALIDATE_PATH, post(validate))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(admission)
}

async fn mutate(State(admission): State<Arc<Admission>>, body: Bytes) -> Response {
    answer(&body, |req| admission.mutate(req))
}

async fn validate(State(admission): State<Arc<Admission>>, body: Bytes) -> Response {
    answer(&body, |req| admission.validate(req))
}

/// Decodes, decides and encodes one review. A review we cannot answer in kind (no uid, not
/// JSON, wrong apiVersion) gets a 400 with a Kubernetes Status saying why.
pub fn answer(body: &[u8], decide: impl FnOnce(&Request) -> Verdict) -> Response {
    let review = match review::decode(body) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "rejected an undecodable AdmissionReview");
            return status_response(StatusCode::BAD_REQUEST, &bad_request(&e.to_string()));
        }
    };
    let verdict = decide(&review.request);
    if !verdict.allowed {
        let message = verdict
            .status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .unwrap_or_default();
        tracing::info!(uid = %review.request.uid, operation = %review.request.operation, name = %review.request.name, %message, "denied");
    }
    match review::encode(&review.api_version, &review.request.uid, &verdict) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode AdmissionReview response");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
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
