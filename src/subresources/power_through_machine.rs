//! The power buttons performed through the Machine (pure): `stop` (with an optional grace
//! period), `forcestop`, `start`, `restart`. Each is recorded on the Machine, not on its VM, so
//! the reconciler converges the VM to it and a GitOps tool re-applying the Machine's manifest
//! does not undo it:
//!
//! - `stop`: `vitistack.io/stopped-at` (the reconciler halts the VM while it is there, see
//!   `reconciler::decide::spec`); with a grace period and a running VMI, KubeVirt's own
//!   `virtualmachines/<vm>/stop` is asked first with it (only KubeVirt may change a running
//!   VMI's `terminationGracePeriodSeconds`).
//! - `forcestop`: the same record, then the VMI deleted with grace period 0.
//! - `start`: the record removed (the spec's run strategy is back in force).
//! - `restart`: `vitistack.io/restarted-at` (the reconciler deletes the VMI started before it).
//!
//! [`options`] reads a request body (KubeVirt's `StopOptions`, `RestartOptions`,
//! `StartOptions`), [`decide`] says what to write and do, or why not.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

use super::power::{self, NoTarget, Target};
use crate::api::Machine;
use crate::api::names::{RESTARTED_AT_ANNOTATION, STOPPED_AT_ANNOTATION};
use crate::api::operations::{RUN_STRATEGY_HALTED, run_strategy};

/// The longest grace period a stop may ask for: a day, as `kubectl machine stop --grace`
/// accepts (KubeVirt's default is 180 s; a Windows guest installing updates may need hours).
pub const MAX_GRACE_SECONDS: i64 = 24 * 60 * 60;
/// The largest request body read (KubeVirt's options are a few fields).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A button performed through the Machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Button {
    Stop,
    ForceStop,
    Start,
    Restart,
}

impl Button {
    pub const ALL: [Button; 4] = [
        Button::Stop,
        Button::ForceStop,
        Button::Start,
        Button::Restart,
    ];

    /// The subresource's name (`machines/<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Button::Stop => "stop",
            Button::ForceStop => "forcestop",
            Button::Start => "start",
            Button::Restart => "restart",
        }
    }

    pub fn parse(subresource: &str) -> Option<Button> {
        Button::ALL.into_iter().find(|b| b.as_str() == subresource)
    }

    /// The reason of the Event recorded on the Machine: a request the reconciler carries out
    /// (its own Events follow, e.g. `Restarted`), or for forcestop, done at once.
    pub fn reason(self) -> &'static str {
        match self {
            Button::Stop => "StopRequested",
            Button::ForceStop => "ForceStopped",
            Button::Start => "StartRequested",
            Button::Restart => "RestartRequested",
        }
    }
}

/// What a request body asks for beyond the button.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `stop`'s `gracePeriod`, in seconds.
    pub grace: Option<i64>,
}

/// KubeVirt's option bodies, all fields of the three read alike: a field of another button's
/// options is refused by name, unknown fields are ignored as KubeVirt does.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Body {
    grace_period: Option<i64>,
    grace_period_seconds: Option<i64>,
    #[serde(default)]
    dry_run: Vec<String>,
    #[serde(default)]
    paused: bool,
}

/// A body refused (answered 400), naming the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadOptions {
    #[error("the request body is not JSON options of machines/{0}: {1}")]
    NotJson(&'static str, String),
    #[error("the request body is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    #[error(
        "gracePeriod: Invalid value: {0}: must be between 0 and {MAX_GRACE_SECONDS} seconds (forcestop for none at all)"
    )]
    Grace(i64),
    #[error("{field}: Forbidden: machines/{button} does not take it{hint}")]
    Unsupported {
        field: &'static str,
        button: &'static str,
        hint: &'static str,
    },
}

/// The options of `button` in `body` (empty: none).
pub fn options(button: Button, body: &[u8]) -> Result<Options, BadOptions> {
    if body.len() > MAX_BODY_BYTES {
        return Err(BadOptions::TooLarge);
    }
    let body: Body = if body.iter().all(u8::is_ascii_whitespace) {
        Body::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| BadOptions::NotJson(button.as_str(), e.to_string()))?
    };
    let unsupported = |field, hint| BadOptions::Unsupported {
        field,
        button: button.as_str(),
        hint,
    };
    if !body.dry_run.is_empty() {
        return Err(unsupported("dryRun", ""));
    }
    if body.paused {
        return Err(unsupported("paused", ": unpause it after start"));
    }
    if body.grace_period_seconds.is_some() {
        let hint = ": stop with gracePeriod, then start";
        return Err(unsupported("gracePeriodSeconds", hint));
    }
    match (button, body.grace_period) {
        (_, None) => Ok(Options::default()),
        (Button::Stop, Some(g)) if (0..=MAX_GRACE_SECONDS).contains(&g) => {
            Ok(Options { grace: Some(g) })
        }
        (Button::Stop, Some(g)) => Err(BadOptions::Grace(g)),
        (Button::ForceStop, Some(_)) => Err(unsupported("gracePeriod", ": it is always 0")),
        (_, Some(_)) => Err(unsupported("gracePeriod", "")),
    }
}

/// A change to the Machine's annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Set(&'static str, String),
    Remove(&'static str),
}

/// What a button does, once allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// KubeVirt's `virtualmachines/<vmi>/stop` with this grace period, before the record.
    pub kubevirt_stop: Option<(Target, i64)>,
    /// Written to the Machine (after the KubeVirt stop, before the deletion); None: nothing.
    pub record: Option<Record>,
    /// The VMI deleted with grace period 0, after the record.
    pub delete_vmi: Option<Target>,
}

/// Why a button is refused (answered 409 Conflict).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    #[error("Machine {0} is being deleted")]
    Deleting(String),
    #[error(
        "Machine {0} is Halted by its spec (spec.runStrategy): there is nothing to {1}; its spec's owner starts it"
    )]
    HaltedBySpec(String, &'static str),
    #[error(
        "Machine {0} is stopped already (machines/stop at {1}); forcestop ends a VM still shutting down"
    )]
    AlreadyStopped(String, String),
    #[error("Machine {0} is stopped (machines/stop at {1}): start it instead")]
    Stopped(String, String),
    #[error("Machine {0} is not stopped (no machines/stop to undo)")]
    NotStopped(String),
    #[error("Machine {0} has no VM running to force-stop")]
    NotRunning(String),
}

/// What `button` with `options` does to `machine` at `now`, or why it is refused.
pub fn decide(
    button: Button,
    options: Options,
    machine: &Machine,
    now: Timestamp,
) -> Result<Plan, Refused> {
    let name = machine.metadata.name.clone().unwrap_or_default();
    if machine.metadata.deletion_timestamp.is_some() {
        return Err(Refused::Deleting(name));
    }
    let empty = BTreeMap::new();
    let annotations = machine.metadata.annotations.as_ref().unwrap_or(&empty);
    let stopped = annotations.get(STOPPED_AT_ANNOTATION).cloned();
    let spec = &machine.spec;
    let halted_by_spec =
        run_strategy(spec.run_strategy.as_deref(), spec.running) == RUN_STRATEGY_HALTED;
    // The VMI the status names (a VM still shutting down has one too).
    let vmi = match power::target(machine) {
        Ok(target) => Some(target),
        Err(NoTarget::NoVmi(_)) => None,
        Err(NoTarget::Deleting(name)) => return Err(Refused::Deleting(name)),
    };
    let stamp = || now.to_string();
    let plan = |record, kubevirt_stop, delete_vmi| Plan {
        kubevirt_stop,
        record,
        delete_vmi,
    };
    match button {
        Button::Stop => {
            if halted_by_spec {
                return Err(Refused::HaltedBySpec(name, "stop"));
            }
            if let Some(at) = stopped {
                return Err(Refused::AlreadyStopped(name, at));
            }
            let kubevirt_stop = vmi.zip(options.grace);
            let record = Record::Set(STOPPED_AT_ANNOTATION, stamp());
            Ok(plan(Some(record), kubevirt_stop, None))
        }
        Button::ForceStop => {
            let Some(vmi) = vmi else {
                return Err(Refused::NotRunning(name));
            };
            // Kept when halted already (by the spec or a stop): only the VMI goes.
            let record = (!halted_by_spec && stopped.is_none())
                .then(|| Record::Set(STOPPED_AT_ANNOTATION, stamp()));
            Ok(plan(record, None, Some(vmi)))
        }
        Button::Start => match stopped {
            _ if halted_by_spec => Err(Refused::HaltedBySpec(name, "start")),
            Some(_) => Ok(plan(
                Some(Record::Remove(STOPPED_AT_ANNOTATION)),
                None,
                None,
            )),
            None => Err(Refused::NotStopped(name)),
        },
        Button::Restart => match stopped {
            // The same refusal as the annotation's at admission (`machine::annotations`).
            _ if halted_by_spec => Err(Refused::HaltedBySpec(name, "restart")),
            Some(at) => Err(Refused::Stopped(name, at)),
            None => Ok(plan(
                Some(Record::Set(RESTARTED_AT_ANNOTATION, stamp())),
                None,
                None,
            )),
        },
    }
}

/// KubeVirt's path for a stop of the VM of `target` (KubeVirt names a VMI after its VM).
pub fn kubevirt_stop_path(target: &Target) -> String {
    format!(
        "/apis/subresources.kubevirt.io/v1/namespaces/{}/virtualmachines/{}/stop",
        target.namespace, target.vmi
    )
}

/// KubeVirt's `StopOptions` with `grace`.
pub fn kubevirt_stop_body(grace: i64) -> Vec<u8> {
    serde_json::json!({ "gracePeriod": grace })
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests;

pub mod act;
