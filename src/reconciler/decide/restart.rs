//! Restarts (pure). Two causes:
//! - `vitistack.io/restarted-at`: a new value restarts the VM once, recorded in
//!   `status.lastRestart` so it is never repeated;
//! - `updateStrategy: Restart`: while KubeVirt's VM says `RestartRequired`, the VM is restarted
//!   to apply the pending change, at most once per Machine generation
//!   (`status.lastRestartGeneration`).
//!
//! A restart deletes the VMI the Machine's VM controls; KubeVirt's VM controller starts a new
//! one from the current template (no aggregated KubeVirt API needed). Exactly once even if the
//! status write after the deletion fails: only a VMI created before the cause (the requested
//! time, the condition's transition) is deleted, and the one KubeVirt starts afterwards is newer.
//!
//! [`wanted`] gathers the decision's inputs from what was observed; [`decide`] is the rule.

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};

use crate::api::names::RESTARTED_AT_ANNOTATION;
use crate::api::operations::{RUN_STRATEGY_HALTED, UPDATE_STRATEGY_RESTART};
use crate::api::{Machine, MachineSpec};
use crate::reconciler::apis::kubevirt::{
    KubeVirtCondition, VirtualMachine, VirtualMachineInstance,
};

use super::provisioning::reason::RESTART_REQUIRED;

/// The VMI as the restart sees it.
pub struct Vmi<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    pub created: Option<Timestamp>,
}

/// A change waiting for a restart under `updateStrategy: Restart`: the VM's `RestartRequired`
/// is True (since `since`) while the Machine is at `generation`.
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    pub generation: i64,
    pub since: Option<Timestamp>,
}

/// What the restart decision starts from.
pub struct Inputs<'a> {
    /// The annotation's value.
    pub requested: Option<&'a str>,
    /// `status.lastRestart`.
    pub last: Option<&'a str>,
    /// Set only under `updateStrategy: Restart`.
    pub pending: Option<Pending>,
    /// `status.lastRestartGeneration`.
    pub last_generation: Option<i64>,
    /// The VMI the Machine's own VM controls.
    pub vmi: Option<&'a Vmi<'a>>,
    /// The run strategy in force.
    pub strategy: &'a str,
    /// The node a drain asks the VMI to leave, when the operator is to restart it off it.
    pub evacuate: Option<&'a str>,
}

/// Why the VM is restarted (the Event says it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    Requested(String),
    PendingChange(i64),
    /// A drain asked the VMI to leave this node (`--external-eviction restart`).
    Evacuation(String),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restart {
    /// The VMI to delete (name, uid as a precondition), and why.
    pub delete_vmi: Option<(String, String, Cause)>,
    /// `status.lastRestart`.
    pub last_restart: Option<String>,
    /// `status.lastRestartGeneration`.
    pub last_restart_generation: Option<i64>,
}

/// The restart `vitistack.io/restarted-at` or `updateStrategy: Restart` asks for: of the VMI
/// our VM controls only (`vm` when it is ours, `vmi` when that VM controls it: judged when
/// observed), under the run `strategy` in force. Nothing while a MachineRestore is
/// `restoring` the Machine.
pub fn wanted(
    machine: &Machine,
    spec: &MachineSpec,
    (vm, vmi): (Option<&VirtualMachine>, Option<&VirtualMachineInstance>),
    (strategy, evacuate): (&str, Option<&str>),
    restoring: bool,
) -> Restart {
    let status = machine.status.as_ref();
    if restoring {
        // What was acted on stays recorded, so nothing is acted on twice.
        return Restart {
            delete_vmi: None,
            last_restart: status.and_then(|s| s.last_restart.clone()),
            last_restart_generation: status.and_then(|s| s.last_restart_generation),
        };
    }
    let vmi = vmi.and_then(|v| {
        let meta = v.meta();
        Some(Vmi {
            name: meta.name.as_deref()?,
            uid: meta.uid.as_deref()?,
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
        })
    });
    let pending = (spec.update_strategy.as_deref() == Some(UPDATE_STRATEGY_RESTART))
        .then(|| restart_required_since(vm))
        .flatten()
        .map(|since| Pending {
            generation: machine.metadata.generation.unwrap_or_default(),
            since,
        });
    decide(&Inputs {
        requested: machine
            .annotations()
            .get(RESTARTED_AT_ANNOTATION)
            .map(String::as_str),
        last: status.and_then(|s| s.last_restart.as_deref()),
        pending,
        last_generation: status.and_then(|s| s.last_restart_generation),
        vmi: vmi.as_ref(),
        strategy,
        evacuate,
    })
}

pub fn decide(i: &Inputs) -> Restart {
    let mut out = Restart {
        delete_vmi: None,
        last_restart: i.last.map(str::to_owned),
        last_restart_generation: i.last_generation,
    };
    // Halted: nothing runs, so nothing is restarted; a requested value is still recorded.
    let vmi = i.vmi.filter(|_| i.strategy != RUN_STRATEGY_HALTED);
    let delete = |v: &Vmi, cause| Some((v.name.to_owned(), v.uid.to_owned(), cause));

    // Refused at admission when not a time; stored past it, it is ignored rather than guessed.
    let requested = i
        .requested
        .filter(|r| Some(*r) != i.last)
        .and_then(|r| Some((r, r.parse::<Timestamp>().ok()?)));
    if let Some((value, at)) = requested {
        out.last_restart = Some(value.to_owned());
        if let Some(v) = vmi.filter(|v| older(v, Some(at))) {
            out.delete_vmi = delete(v, Cause::Requested(value.to_owned()));
        }
    }

    // A drain: the VMI marked for it goes (once: the one KubeVirt starts is not marked).
    if let (None, Some(node), Some(v)) = (&out.delete_vmi, i.evacuate, vmi) {
        out.delete_vmi = delete(v, Cause::Evacuation(node.to_owned()));
    }

    let Some(p) = i.pending.filter(|p| i.last_generation < Some(p.generation)) else {
        return out;
    };
    match (&out.delete_vmi, vmi.filter(|v| older(v, p.since))) {
        // One restart applies both the request and the pending change.
        (Some(_), _) => out.last_restart_generation = Some(p.generation),
        (None, Some(v)) => {
            out.delete_vmi = delete(v, Cause::PendingChange(p.generation));
            out.last_restart_generation = Some(p.generation);
        }
        // Not running, or started since the condition appeared: KubeVirt clears it itself.
        (None, None) => {}
    }
    out
}

/// KubeVirt's `RestartRequired` condition on the VM, while it is True.
fn restart_condition(vm: Option<&VirtualMachine>) -> Option<&KubeVirtCondition> {
    vm.and_then(|v| v.status.as_ref())?
        .conditions
        .iter()
        .find(|c| c.type_ == RESTART_REQUIRED && c.status == "True")
}

/// Since when KubeVirt's VM has said `RestartRequired` (its transition time, when it has one),
/// while the condition is True.
pub fn restart_required_since(vm: Option<&VirtualMachine>) -> Option<Option<Timestamp>> {
    let c = restart_condition(vm)?;
    Some(
        c.last_transition_time
            .as_deref()
            .and_then(|t| t.parse().ok()),
    )
}

/// KubeVirt's `RestartRequired` condition while it is True (a change such as cores or a removed
/// CD-ROM that only a restart applies), as (reason, message).
pub fn restart_required(vm: Option<&VirtualMachine>) -> Option<(String, String)> {
    let c = restart_condition(vm)?;
    Some((
        c.reason
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| RESTART_REQUIRED.to_owned()),
        c.message
            .clone()
            .unwrap_or_else(|| "a change to the VM applies only after a restart".to_owned()),
    ))
}

/// Whether the VMI was created before `at` (unknown times: not provably older, kept).
fn older(v: &Vmi, at: Option<Timestamp>) -> bool {
    matches!((v.created, at), (Some(c), Some(at)) if c < at)
}

#[cfg(test)]
mod tests;
