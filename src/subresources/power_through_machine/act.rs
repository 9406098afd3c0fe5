//! Performing a button through the Machine (observe the Machine, decide, act): KubeVirt's stop
//! with a grace period, the record on the Machine, the VMI deleted, an Event naming the user.
//! The operator acts with its own credentials, on this Machine only, and writes nothing but the
//! record [`super::decide`] chose (an annotation the reconciler acts on, as the Machine's author
//! could write it) and, for forcestop, the deletion of the Machine's own VMI.

use axum::body::{Body, to_bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource};

use super::super::answer::{Shared, status};
use super::super::front_proxy::RemoteUser;
use super::super::power::Target;
use super::super::relay::{RELAY_TIMEOUT, cluster_client, unavailable};
use super::{BadOptions, Button, MAX_BODY_BYTES, Plan, Record};
use crate::api::Machine;
use crate::api::names::{FIELD_MANAGER, POWER_FIELD_MANAGER};
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;

/// PUT `machines/{name}/{button}` in `namespace`, for `user` (authorized by kube-apiserver).
pub async fn put(
    shared: &Shared,
    (namespace, name): (&str, &str),
    button: Button,
    user: &RemoteUser,
    body: Body,
) -> Response {
    let options = match to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => super::options(button, &bytes),
        Err(_) => Err(BadOptions::TooLarge),
    };
    let options = match options {
        Ok(options) => options,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
    };
    let machines = Api::<Machine>::namespaced(shared.client.clone(), namespace);
    // The record is written on the Machine as decided on; kube-apiserver refuses it when the
    // Machine changed meanwhile (its status does, often), and then it is decided on again.
    let mut stopped_by_kubevirt = false;
    for _ in 0..RECORD_ATTEMPTS {
        let machine = match machines.get_opt(name).await {
            Ok(Some(machine)) => machine,
            Ok(None) => {
                let message = format!("Machine {namespace}/{name} not found");
                return status(StatusCode::NOT_FOUND, "NotFound", &message);
            }
            Err(e) => return unavailable(&format!("reading Machine {namespace}/{name}: {e}")),
        };
        let plan = match super::decide(button, options, &machine, Timestamp::now()) {
            Ok(plan) => plan,
            Err(e) => return status(StatusCode::CONFLICT, "Conflict", &e.to_string()),
        };
        let performed = perform(shared, &machines, &machine, &plan, &mut stopped_by_kubevirt).await;
        match performed {
            Ok(cluster) => {
                let grace = plan.kubevirt_stop.as_ref().map(|(_, g)| *g);
                tracing::info!(user = %user.name, machine = %name, namespace = %namespace, cluster, subresource = button.as_str(), grace, "power button performed through the Machine");
                let what = describe(&plan, &cluster);
                record(&shared.client, &machine, button, &user.name, what).await;
                return StatusCode::OK.into_response();
            }
            Err(Failed::Changed) => continue,
            Err(Failed::Answer(response)) => return *response,
        }
    }
    let message = format!(
        "Machine {namespace}/{name} changed {RECORD_ATTEMPTS} times while recording; try again"
    );
    status(StatusCode::CONFLICT, "Conflict", &message)
}

/// How often the record is tried on a Machine that keeps changing.
const RECORD_ATTEMPTS: usize = 5;

/// Why a plan was not performed.
enum Failed {
    /// The Machine changed since it was read: decide again.
    Changed,
    /// The answer telling the caller why not.
    Answer(Box<Response>),
}

impl From<Box<Response>> for Failed {
    fn from(response: Box<Response>) -> Failed {
        Failed::Answer(response)
    }
}

/// How the Event tells what was done, beyond the button.
fn describe(plan: &Plan, cluster: &str) -> String {
    match (&plan.kubevirt_stop, &plan.delete_vmi) {
        (Some((_, grace)), _) => format!("grace period {grace} s, KubeVirt on {cluster}"),
        (None, Some(t)) => format!("VMI {} deleted with grace period 0 on {cluster}", t.vmi),
        (None, None) => "recorded on the Machine".to_owned(),
    }
}

/// The plan in its order: KubeVirt's stop, the record, the deletion. Returns the cluster acted
/// on (for the log and the Event), or why not.
async fn perform(
    shared: &Shared,
    machines: &Api<Machine>,
    machine: &Machine,
    plan: &Plan,
    stopped_by_kubevirt: &mut bool,
) -> Result<String, Failed> {
    let target = plan
        .kubevirt_stop
        .as_ref()
        .map(|(t, _)| t)
        .or(plan.delete_vmi.as_ref());
    let cluster = target
        .and_then(|t| t.cluster.clone())
        .unwrap_or_else(|| "the operator's own cluster".to_owned());
    // The cluster's client first: a cluster not ready leaves the Machine as it was.
    let client = target.map(|t| cluster_client(shared, t)).transpose()?;
    // Asked once, however often the record is tried again.
    if let (Some((target, grace)), Some(client), false) =
        (&plan.kubevirt_stop, &client, *stopped_by_kubevirt)
    {
        kubevirt_stop(client, target, *grace, &cluster).await?;
        *stopped_by_kubevirt = true;
    }
    if let Some(change) = &plan.record {
        write_record(machines, machine, change).await?;
    }
    if let (Some(target), Some(client)) = (&plan.delete_vmi, &client) {
        delete_vmi(client, target, &cluster).await?;
    }
    Ok(cluster)
}

/// KubeVirt's own stop with a grace period: virt-api sets the running VMI's
/// `terminationGracePeriodSeconds` (a VMI's spec is KubeVirt's alone to change) and halts the VM,
/// as the record about to be written will have the reconciler do.
async fn kubevirt_stop(
    client: &Client,
    target: &Target,
    grace: i64,
    cluster: &str,
) -> Result<(), Box<Response>> {
    let request = axum::http::Request::put(super::kubevirt_stop_path(target))
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(super::kubevirt_stop_body(grace))
        .map_err(|e| Box::new(unavailable(&e.to_string())))?;
    let answer = tokio::time::timeout(RELAY_TIMEOUT, client.request_text(request)).await;
    match answer {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Box::new(kubevirt_error(e, cluster))),
        Err(_) => Err(Box::new(timeout(cluster))),
    }
}

fn timeout(cluster: &str) -> Response {
    let message = format!("KubeVirt on {cluster} did not answer within {RELAY_TIMEOUT:?}");
    status(StatusCode::GATEWAY_TIMEOUT, "Timeout", &message)
}

/// KubeVirt's own answer (not found, not running, ...), said to come from it.
fn kubevirt_error(e: kube::Error, cluster: &str) -> Response {
    match e {
        kube::Error::Api(e) => {
            let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::BAD_GATEWAY);
            status(
                code,
                &e.reason,
                &format!("KubeVirt on {cluster}: {}", e.message),
            )
        }
        e => unavailable(&format!("KubeVirt on {cluster}: {e}")),
    }
}

/// The record, on the Machine as it was decided on (its resourceVersion: a Machine changed
/// meanwhile is decided on again, not written blindly).
async fn write_record(
    machines: &Api<Machine>,
    machine: &Machine,
    change: &Record,
) -> Result<(), Failed> {
    let (key, value) = match change {
        Record::Set(key, value) => (*key, serde_json::Value::from(value.as_str())),
        Record::Remove(key) => (*key, serde_json::Value::Null),
    };
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": machine.metadata.resource_version,
            "annotations": { key: value },
        }
    });
    let name = machine.metadata.name.as_deref().unwrap_or_default();
    let params = PatchParams {
        field_manager: Some(POWER_FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match machines.patch(name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Err(Failed::Changed),
        // Admission's refusal, or the API's: passed on as it is.
        Err(kube::Error::Api(e)) => {
            let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::BAD_GATEWAY);
            Err(Box::new(status(code, &e.reason, &e.message)).into())
        }
        Err(e) => {
            let message = format!("recording on Machine {name}: {e}");
            Err(Box::new(unavailable(&message)).into())
        }
    }
}

/// The Machine's VMI deleted with grace period 0 (one gone already is what was asked).
async fn delete_vmi(client: &Client, target: &Target, cluster: &str) -> Result<(), Box<Response>> {
    let vmis = Api::<VirtualMachineInstance>::namespaced(client.clone(), &target.namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let deleted = tokio::time::timeout(RELAY_TIMEOUT, vmis.delete(&target.vmi, &params)).await;
    match deleted {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(e))) if e.code == 404 => Ok(()),
        Ok(Err(kube::Error::Api(e))) => {
            let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::BAD_GATEWAY);
            let message = format!("deleting VMI {} on {cluster}: {}", target.vmi, e.message);
            Err(Box::new(status(code, &e.reason, &message)))
        }
        Ok(Err(e)) => Err(Box::new(unavailable(&format!(
            "deleting VMI {} on {cluster}: {e}",
            target.vmi
        )))),
        Err(_) => Err(Box::new(timeout(cluster))),
    }
}

/// An Event on the Machine naming who pressed what; a failure to record is logged only.
async fn record(client: &Client, machine: &Machine, button: Button, user: &str, what: String) {
    let reporter = Reporter {
        controller: FIELD_MANAGER.to_owned(),
        instance: None,
    };
    let event = Event {
        type_: EventType::Normal,
        reason: button.reason().to_owned(),
        note: Some(format!(
            "{} by {user} through machines/{} ({what})",
            match button {
                Button::Stop => "stop requested",
                Button::ForceStop => "force-stopped",
                Button::Start => "start requested",
                Button::Restart => "restart requested",
            },
            button.as_str()
        )),
        action: button.reason().to_owned(),
        secondary: None,
    };
    let recorder = Recorder::new(client.clone(), reporter);
    if let Err(e) = recorder.publish(&event, &machine.object_ref(&())).await {
        tracing::warn!(error = %e, subresource = button.as_str(), "could not publish event");
    }
}
