//! Relaying a power button (observe the Machine, decide its VMI, act on KubeVirt, record an
//! Event): the operator's own credentials for the VMI's cluster, the caller's name in the Event.

use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource};

use super::answer::{Shared, authenticate, status, unauthorized};
use super::power::{self, Power, Target};
use crate::api::Machine;
use crate::api::names::FIELD_MANAGER;

/// How long KubeVirt has to answer: less than the listener's request deadline
/// ([`super::serve::LIMITS`]), which would otherwise cut the connection without a word.
pub const RELAY_TIMEOUT: Duration = Duration::from_secs(8);

/// PUT `.../namespaces/{namespace}/machines/{name}/{subresource}`.
pub async fn put(
    State(shared): State<Shared>,
    Path((namespace, name, subresource)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let user = match authenticate(&shared.verifier, request.headers()) {
        Ok(user) => user,
        Err(why) => return unauthorized(&why),
    };
    let Some(power) = Power::parse(&subresource) else {
        let message = format!("machines/{subresource} is not served (yet)");
        return status(StatusCode::NOT_FOUND, "NotFound", &message);
    };
    let (machine, target, client) = match machine_target(&shared, &namespace, &name).await {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let path = power::kubevirt_path(power, &target);
    let cluster = target
        .cluster
        .as_deref()
        .unwrap_or("the operator's own cluster");
    let relayed = axum::http::Request::put(&path)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(b"{}".to_vec());
    let request = match relayed {
        Ok(request) => request,
        Err(e) => return unavailable(&e.to_string()),
    };
    // Within the listener's request deadline, so the caller hears why rather than a cut.
    let Ok(answer) = tokio::time::timeout(RELAY_TIMEOUT, client.request_text(request)).await else {
        let message = format!("KubeVirt on {cluster} did not answer within {RELAY_TIMEOUT:?}");
        return status(StatusCode::GATEWAY_TIMEOUT, "Timeout", &message);
    };
    match answer {
        Ok(_) => {
            tracing::info!(user = %user.name, machine = %name, namespace = %namespace, cluster, subresource = power.as_str(), "relayed to KubeVirt");
            record(&shared.client, &machine, power, &user.name, cluster).await;
            StatusCode::OK.into_response()
        }
        // KubeVirt's own answer (not found, already paused, ...), said to come from it.
        Err(kube::Error::Api(e)) => {
            let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::BAD_GATEWAY);
            let message = format!("KubeVirt on {cluster}: {}", e.message);
            status(code, &e.reason, &message)
        }
        Err(e) => unavailable(&format!("KubeVirt on {cluster}: {e}")),
    }
}

#[cfg(test)]
#[test]
fn the_relay_ends_before_the_listener_cuts_it() {
    assert!(RELAY_TIMEOUT < super::serve::LIMITS.request_timeout);
}

pub(super) fn unavailable(message: &str) -> Response {
    status(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        message,
    )
}

/// The Machine `namespace/name`, the VMI its status names and the operator's client of that
/// VMI's cluster; or the answer saying why not (404, 409, 503).
pub(super) async fn machine_target(
    shared: &Shared,
    namespace: &str,
    name: &str,
) -> Result<(Machine, Target, Client), Box<Response>> {
    let machines = Api::<Machine>::namespaced(shared.client.clone(), namespace);
    let machine = match machines.get_opt(name).await {
        Ok(Some(machine)) => machine,
        Ok(None) => {
            let message = format!("Machine {namespace}/{name} not found");
            return Err(Box::new(status(
                StatusCode::NOT_FOUND,
                "NotFound",
                &message,
            )));
        }
        Err(e) => {
            let message = format!("reading Machine {namespace}/{name}: {e}");
            return Err(Box::new(unavailable(&message)));
        }
    };
    let target = match power::target(&machine) {
        Ok(target) => target,
        Err(e) => {
            let message = e.to_string();
            return Err(Box::new(status(StatusCode::CONFLICT, "Conflict", &message)));
        }
    };
    let client = cluster_client(shared, &target)?;
    Ok((machine, target, client))
}

/// The operator's client of the VMI's cluster: its own, or the KubevirtConfig's while ready.
pub(super) fn cluster_client(shared: &Shared, target: &Target) -> Result<Client, Box<Response>> {
    let Some(name) = &target.cluster else {
        return Ok(shared.client.clone());
    };
    let health = shared.registry.get(name);
    match health.as_ref().and_then(|h| h.ready()) {
        Some(connection) => Ok(connection.client.clone()),
        None => {
            let reason = health.map_or("not known to this replica (yet)", |h| h.reason().as_str());
            Err(Box::new(unavailable(&format!(
                "the Machine's cluster (KubevirtConfig {name}) is not ready: {reason}"
            ))))
        }
    }
}

/// An Event on the Machine naming who pressed what; a failure to record is logged only.
async fn record(client: &Client, machine: &Machine, power: Power, user: &str, cluster: &str) {
    let reporter = Reporter {
        controller: FIELD_MANAGER.to_owned(),
        instance: None,
    };
    let event = Event {
        type_: EventType::Normal,
        reason: power.reason().to_owned(),
        note: Some(format!(
            "{} by {user} through machines/{} (KubeVirt on {cluster})",
            power.reason().to_lowercase(),
            power.as_str()
        )),
        action: power.reason().to_owned(),
        secondary: None,
    };
    let recorder = Recorder::new(client.clone(), reporter);
    if let Err(e) = recorder.publish(&event, &machine.object_ref(&())).await {
        tracing::warn!(error = %e, subresource = power.as_str(), "could not publish event");
    }
}
