//! The HTTP face of the aggregated API. Every caller here is kube-apiserver's front proxy (the
//! handshake saw to that); discovery is answered to it as such (kube-apiserver checks it to mark
//! the APIService Available, naming no user), anything else needs the user it names.

use axum::Json;
use axum::Router;
use axum::extract::Extension;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, put};

use super::answer::{Shared, authenticate, status, unauthorized};
use super::held::Held;
use super::{GROUP, VERSION};
use super::{buttons, console, discovery};

/// `held`: the console and VNC sessions' places ([`console`]).
pub fn router(shared: Shared, held: Held) -> Router {
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
            put(buttons::put).get(console::get),
        )
        .fallback(not_served)
        .layer(Extension(held))
        .with_state(shared)
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
