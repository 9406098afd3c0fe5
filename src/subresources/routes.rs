//! The HTTP face of the aggregated API. Every caller here is kube-apiserver's front proxy (the
//! handshake saw to that); discovery is answered to it as such (kube-apiserver checks it to mark
//! the APIService Available, naming no user), anything else needs the user it names.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};

use super::front_proxy::{self, RemoteUser};
use super::verifier::FrontProxyVerifier;
use super::{GROUP, VERSION};
use super::{discovery, relay};
use crate::clusters::Registry;

/// What the handlers share: the front proxy trusted, the operator's client of its own cluster
/// and the remote clusters' (filled on the leader).
#[derive(Clone)]
pub struct Shared {
    pub verifier: Arc<FrontProxyVerifier>,
    pub client: kube::Client,
    pub registry: Registry,
}

pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/apis", get(|| async { Json(discovery::group_list()) }))
        .route(
            &format!("/apis/{GROUP}"),
            get(|| async { Json(discovery::api_group()) }),
        )
        .route(
            &format!("/apis/{GROUP}/{VERSION}"),
            get(|| async { Json(discovery::resource_list()) }),
        )
        .route(
            &format!(
                "/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/machines/{{name}}/{{subresource}}"
            ),
            put(relay::put),
        )
        .fallback(not_served)
        .with_state(shared)
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

async fn not_served(State(shared): State<Shared>, request: Request) -> Response {
    if let Err(why) = authenticate(&shared.verifier, request.headers()) {
        return unauthorized(&why);
    }
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!(
            "{} {} is not served (yet)",
            request.method(),
            request.uri().path()
        ),
    )
}
