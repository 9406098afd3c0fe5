//! The Machine's status as a pure function of what the reconciler saw and did.
//!
//! [`compute`] returns the status to store; [`cluster_unready`] the one while its remote cluster
//! cannot be worked on. Each equals the previous status exactly when nothing but time has passed
//! (`lastUpdated` and every `lastTransitionTime` are carried over), so the caller writes only
//! when the two differ.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::MachineStatus;
use crate::api::source::DiskStatus;

use super::eviction::EVICTION_REQUESTED;
use super::node::NODE_UNREACHABLE;
use super::problem::Problem;
use super::provisioning::{self, Verdict};
use super::{guest, migration};
use crate::api::machine::MAX_INTERFACE_STATUSES;
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance, vmi_phase};

pub use super::problem::{condition, phase, reason};
use storage::{disks_retained, storage_condition};

/// What the reconciler saw and did for one Machine.
pub struct Reconciled<'a> {
    /// Whether the Machine asks for a running VM (`spec.running`, default true).
    pub running: bool,
    /// Everything that blocks it, including refused writes and conflicts.
    pub problems: &'a [Problem],
    /// The VM as last written or observed, when it is ours; `None` otherwise.
    pub vm: Option<&'a VirtualMachine>,
    /// The VMI, only when the Machine's VM controls it.
    pub vmi: Option<&'a VirtualMachineInstance>,
    /// Each blank disk's claim name and the claim, if it exists.
    pub claims: Vec<(String, Option<&'a PersistentVolumeClaim>)>,
    /// Number of networks in the spec (0: the pod network).
    pub networks: usize,
    /// The spec's networks: their addresses are shown as `interfaces[].desiredAddresses`.
    pub spec_networks: &'a [crate::api::machine::Network],
    /// The DataVolumes' verdict (disks with a source, CD-ROMs); `None` without any.
    pub provisioning: Option<&'a Verdict>,
    /// `status.disks[]`.
    pub disks: Vec<DiskStatus>,
    /// `vitistack.io/retain-disks` is `"true"`: `DisksRetained` is shown.
    pub retain: bool,
    /// The `vitistack.io/restarted-at` value last acted on.
    pub last_restart: Option<String>,
    /// `status.lastRestartGeneration`.
    pub last_restart_generation: Option<i64>,
    /// A MachineRestore holding the VM and disks (its name and step): `Restoring` is shown.
    pub restoring: Option<(&'a str, &'a str)>,
    /// The Machine's snapshots: `status.snapshots` and `SnapshotsReady`.
    pub snapshots: Option<&'a snapshots::Seen>,
    /// The KubevirtConfig whose cluster runs the VM; `None` on the operator's own.
    pub cluster: Option<&'a str>,
    /// That cluster's identity (see `MachineStatus::cluster_identity`).
    pub cluster_identity: Option<&'a str>,
    /// A node drain that reached the VM: `EvictionRequested` is shown.
    pub eviction: Option<&'a super::eviction::Eviction>,
    /// The VM's node, not Ready past the grace: `Ready=False`, `NodeUnreachable`.
    pub node: Option<&'a super::node::Unreachable>,
    /// The restart budget's word on this Machine: `RestartPending`.
    pub restart_pending: Option<&'a super::restart_budget::Shown>,
    /// Disks waiting for a restart, not hot-plugged: `RestartRequired` says why.
    pub hotplug: Option<&'a super::hotplug::Plan>,
}

/// The status to store, given the previous one, the Machine's generation and `now`.
pub fn compute(
    previous: Option<&MachineStatus>,
    generation: Option<i64>,
    r: &Reconciled,
    now: Timestamp,
) -> MachineStatus {
    let (phase, conds, vm_name, vmi) = if let Some(invalid) = invalid_spec(r) {
        let (reason, message) = (invalid.reason(), invalid.to_string());
        let unknown = |type_| Cond::new(type_, "Unknown", reason, message.clone());
        (
            phase::FAILED,
            vec![
                Cond::new(condition::READY, "False", reason, message.clone()),
                Cond::new(
                    condition::VIRTUAL_MACHINE_READY,
                    "False",
                    reason,
                    message.clone(),
                ),
                unknown(condition::STORAGE_READY),
                unknown(condition::NETWORK_READY),
            ],
            None,
            None,
        )
    } else {
        let storage = storage_condition(r);
        let network = network_condition(r);
        let vm = vm_condition(r);
        let phase = machine_phase(r);
        // A dead node outranks the rest: the VM cannot be reached, whatever else holds.
        let ready = match r.node {
            Some(u) => Cond::new(
                condition::READY,
                "False",
                NODE_UNREACHABLE,
                u.message.clone(),
            ),
            None => ready_condition(phase, [&vm, &storage, &network]),
        };
        let mut conds = vec![ready, vm, storage, network];
        conds.extend(mirrored::conditions(r));
        if r.retain {
            conds.push(disks_retained(r));
        }
        conds.extend(
            r.restoring
                .map(|(name, step)| restoring::condition(name, step)),
        );
        conds.extend(r.snapshots.and_then(snapshots::condition));
        conds.extend(cluster::ready(r.cluster));
        conds.extend(
            r.eviction
                .map(|e| Cond::new(EVICTION_REQUESTED, "True", e.reason, e.message.clone())),
        );
        conds.extend(r.restart_pending.map(|p| {
            let type_ = super::restart_budget::RESTART_PENDING;
            Cond::new(type_, p.status, p.reason, p.message.clone())
        }));
        (phase, conds, r.vm.map(|vm| vm.name_any()), r.vmi)
    };

    let previous_conditions = previous.map(|p| p.conditions.as_slice()).unwrap_or(&[]);
    let now = Time(truncate_to_seconds(now));
    let conditions = conds
        .into_iter()
        .map(|c| c.into_condition(generation, previous_conditions, &now))
        .collect();
    let vmi_status = vmi.and_then(|v| v.status.as_ref());
    let mut status = MachineStatus {
        phase: Some(phase.to_owned()),
        conditions,
        vm_name,
        vmi_name: vmi.map(|v| v.name_any()),
        ip_addresses: vmi_status.map(mirrored::ip_addresses).unwrap_or_default(),
        node_name: vmi_status.and_then(|s| s.node_name.clone()),
        last_updated: previous.and_then(|p| p.last_updated.clone()),
        observed_generation: generation,
        disks: r.disks.clone(),
        vm_status: provisioning::vm_status(r.vm),
        migration: vmi_status.and_then(migration::status),
        interfaces: guest::with_desired(
            vmi_status
                .map(|s| guest::interfaces(s, MAX_INTERFACE_STATUSES))
                .unwrap_or_default(),
            r.spec_networks,
            MAX_INTERFACE_STATUSES,
        ),
        guest: vmi_status.and_then(guest::guest),
        last_restart: r.last_restart.clone(),
        last_restart_generation: r.last_restart_generation,
        snapshots: r.snapshots.map(snapshots::refs).unwrap_or_default(),
        cluster: r.cluster.map(str::to_owned),
        cluster_identity: r.cluster_identity.map(str::to_owned),
    };
    if previous != Some(&status) {
        status.last_updated = Some(now);
    }
    status
}

/// A condition before its timestamps and generation are filled in.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Cond {
    type_: &'static str,
    status: &'static str,
    reason: String,
    message: String,
    /// False only while something works towards True (CDI importing, a claim binding).
    waiting: bool,
}

impl Cond {
    pub(super) fn new(
        type_: &'static str,
        status: &'static str,
        reason: &str,
        message: String,
    ) -> Self {
        Cond {
            type_,
            status,
            reason: reason.to_owned(),
            message,
            waiting: false,
        }
    }

    fn is_true(&self) -> bool {
        self.status == "True"
    }

    /// `lastTransitionTime` moves only when the status (True/False/Unknown) changes.
    pub(super) fn into_condition(
        self,
        generation: Option<i64>,
        previous: &[Condition],
        now: &Time,
    ) -> Condition {
        let last_transition_time = previous
            .iter()
            .find(|p| p.type_ == self.type_ && p.status == self.status)
            .map(|p| p.last_transition_time.clone())
            .unwrap_or_else(|| now.clone());
        Condition {
            type_: self.type_.to_owned(),
            status: self.status.to_owned(),
            reason: self.reason,
            message: self.message,
            last_transition_time,
            observed_generation: generation,
        }
    }
}

/// The status of a Machine whose remote cluster `name` cannot be worked on now (see
/// [`cluster`]), for `reason` (one CamelCase word, the KubevirtConfig's) and `message`: the
/// previous status with the cluster recorded, and `ClusterReady` and `Ready` False.
pub fn cluster_unready(
    previous: Option<&MachineStatus>,
    generation: Option<i64>,
    (name, reason, message): (&str, &str, &str),
    now: Timestamp,
) -> MachineStatus {
    let mut status = previous.cloned().unwrap_or_default();
    status.cluster = Some(name.to_owned());
    let message = format!("KubevirtConfig {name}: {message}");
    let now = Time(truncate_to_seconds(now));
    for type_ in [condition::CLUSTER_READY, condition::READY] {
        let cond = Cond::new(type_, "False", reason, message.clone());
        let new = cond.into_condition(generation, &status.conditions, &now);
        match status.conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => *c = new,
            None => status.conditions.push(new),
        }
    }
    if previous != Some(&status) {
        status.last_updated = Some(now);
    }
    status
}

pub(super) fn truncate_to_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn invalid_spec<'a>(r: &Reconciled<'a>) -> Option<&'a Problem> {
    r.problems
        .iter()
        .find(|p| matches!(p, Problem::InvalidSpec { .. }))
}

/// The problems on condition `type_`: False with the first one's reason, and every message of
/// that reason (a second kind of problem shows once the first is fixed).
fn problem_condition(r: &Reconciled, type_: &'static str) -> Option<Cond> {
    let mut on = r.problems.iter().filter(|p| p.condition() == type_);
    let first = on.next()?;
    let reason = first.reason();
    let message = std::iter::once(first)
        .chain(on.filter(|p| p.reason() == reason))
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    Some(Cond::new(type_, "False", reason, message))
}

fn network_condition(r: &Reconciled) -> Cond {
    let t = condition::NETWORK_READY;
    if let Some(c) = problem_condition(r, t) {
        return c;
    }
    let message = match r.networks {
        0 => "Pod network".to_owned(),
        1 => "1 network attached".to_owned(),
        n => format!("{n} networks attached"),
    };
    Cond::new(t, "True", reason::NETWORK_CONFIGURED, message)
}

fn vm_condition(r: &Reconciled) -> Cond {
    let t = condition::VIRTUAL_MACHINE_READY;
    if let Some(c) = problem_condition(r, t) {
        return c;
    }
    let Some(vm) = r.vm else {
        return Cond::new(
            t,
            "False",
            reason::VM_PENDING,
            "Waiting for storage and networks before creating the VirtualMachine".into(),
        );
    };
    if let Some(message) = unschedulable(r) {
        return Cond::new(t, "False", reason::INSUFFICIENT_RESOURCES, message);
    }
    if let Some(s) = r.vmi.and_then(|v| v.status.as_ref())
        && s.phase.as_deref() == Some(vmi_phase::FAILED)
    {
        let why = s.reason.as_deref().unwrap_or("no reason given");
        return Cond::new(
            t,
            "False",
            reason::VM_FAILED,
            format!("VirtualMachineInstance failed: {why}"),
        );
    }
    Cond::new(
        t,
        "True",
        reason::VM_CREATED,
        format!("VirtualMachine {} exists", vm.name_any()),
    )
}

/// KubeVirt reports an unschedulable VMI on its `PodScheduled` condition, and the VM's printable
/// status as `ErrorUnschedulable`.
fn unschedulable(r: &Reconciled) -> Option<String> {
    let from_vmi = r
        .vmi
        .and_then(|v| v.status.as_ref())
        .into_iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
        .map(|c| {
            c.message
                .clone()
                .unwrap_or_else(|| "the VirtualMachineInstance cannot be scheduled".to_owned())
        });
    from_vmi.or_else(|| {
        let printable =
            r.vm.and_then(|v| v.status.as_ref())
                .and_then(|s| s.printable_status.as_deref());
        (printable == Some("ErrorUnschedulable"))
            .then(|| "the VirtualMachineInstance cannot be scheduled".to_owned())
    })
}

/// Pending is never written: it means "accepted, not reconciled yet", which a Machine without
/// a status is. Once reconciled, a Machine whose VM is held back is Creating.
fn machine_phase(r: &Reconciled) -> &'static str {
    let vmi_phase = r
        .vmi
        .and_then(|v| v.status.as_ref())
        .and_then(|s| s.phase.as_deref());
    match vmi_phase {
        Some(vmi_phase::FAILED) => phase::FAILED,
        Some(vmi_phase::RUNNING) => phase::RUNNING,
        None | Some(vmi_phase::SUCCEEDED) if !r.running => phase::STOPPED,
        _ => phase::CREATING,
    }
}

/// Ready mirrors the most telling False condition: something to fix before something to wait for.
fn ready_condition(phase: &str, others: [&Cond; 3]) -> Cond {
    let t = condition::READY;
    let waiting = |c: &&&Cond| {
        c.waiting || matches!(c.reason.as_str(), reason::PVC_PENDING | reason::VM_PENDING)
    };
    let bad = others
        .iter()
        .find(|c| !c.is_true() && !waiting(c))
        .or_else(|| others.iter().find(|c| !c.is_true()));
    if let Some(bad) = bad {
        return Cond::new(t, "False", &bad.reason, bad.message.clone());
    }
    match phase {
        phase::RUNNING => Cond::new(t, "True", reason::RUNNING, "The VM is running".into()),
        phase::STOPPED => Cond::new(t, "False", reason::STOPPED, "The VM is stopped".into()),
        _ => Cond::new(
            t,
            "False",
            reason::CREATING,
            "Waiting for the VirtualMachineInstance to run".into(),
        ),
    }
}

pub mod cluster;
mod mirrored;
mod restoring;
pub mod snapshots;
mod storage;
#[cfg(test)]
mod tests;
