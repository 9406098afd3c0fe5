//! What every handler of the aggregated API shares: its state, the user the front proxy names,
//! and Kubernetes Status answers (apart from the routes, so handlers need not import them).

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::front_proxy::{self, RemoteUser};
use super::verifier::FrontProxyVerifier;
use crate::clusters::Registry;

/// What the handlers share: the front proxy trusted, the operator's client of its own cluster
/// and the remote clusters' (filled on the leader).
#[derive(Clone)]
pub struct Shared {
    pub verifier: Arc<FrontProxyVerifier>,
    pub client: kube::Client,
    pub registry: Registry,
}

/// A Kubernetes Status answer, as clients of kube-apiserver expect from it.
pub fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    (code, Json(body)).into_response()
}

/// The user the front proxy names, or why none (answered 401: [`unauthorized`]).
pub fn authenticate(
    verifier: &FrontProxyVerifier,
    headers: &HeaderMap,
) -> Result<RemoteUser, String> {
    let proxy = verifier
        .trusted()
        .ok_or_else(|| "the front proxy's CA is not read yet".to_owned())?;
    front_proxy::user(headers, &proxy).map_err(|e| e.to_string())
}

pub fn unauthorized(message: &str) -> Response {
    status(StatusCode::UNAUTHORIZED, "Unauthorized", message)
}
