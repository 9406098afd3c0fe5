//! A PUT of `machines/<name>/<subresource>`: a button relayed to KubeVirt ([`super::relay`]:
//! pause, unpause, softreboot) or performed through the Machine
//! ([`super::power_through_machine`]: stop, forcestop, start, restart).

use axum::extract::{Path, Request, State};
use axum::response::Response;

use super::answer::{Shared, authenticate, unauthorized};
use super::power_through_machine::{Button, act};
use super::relay;

pub async fn put(
    State(shared): State<Shared>,
    Path((namespace, name, subresource)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let Some(button) = Button::parse(&subresource) else {
        return relay::put(State(shared), Path((namespace, name, subresource)), request).await;
    };
    let user = match authenticate(&shared.verifier, request.headers()) {
        Ok(user) => user,
        Err(why) => return unauthorized(&why),
    };
    let at = (namespace.as_str(), name.as_str());
    act::put(&shared, at, button, &user, request.into_body()).await
}
