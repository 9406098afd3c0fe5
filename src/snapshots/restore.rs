//! The steps of a MachineRestore, decided from what was observed (pure, tests in
//! `restore/tests.rs`).
//!
//! `Pending` → `Stopping` (the VM is halted and its VMI gone; the Machine's uid is pinned) →
//! `Restoring` (one VirtualMachineRestore writes every disk into a new claim; KubeVirt points the
//! VM at them) → `Adopting` (each old claim `<machine>-<disk>` of a blank disk is deleted and
//! made again, with the Machine's evidence, as a clone of its restored claim; each old DataVolume
//! `<machine>-<disk>` of a disk with a source is deleted and, once CDI's claim of it is gone, made
//! again as a CDI clone of its restored claim) → `Starting` (the reconciler writes the VM from the
//! Machine again: its volumes back on `<machine>-<disk>`, its run strategy as the spec says now)
//! → `Succeeded` (then the restored claims are deleted, unless `keepRestoredClaims`).
//! CD-ROMs are read-only media imported from their source: nothing of them is restored, their
//! DataVolumes are never touched. While `Stopping`, `Restoring` or `Adopting`, the Machine
//! reconciler holds its writes, and a deleted Machine waits ([`holds`]).
//!
//! The commit point is the first old disk deleted. Before it every restored claim is proven
//! ([`proof`]: made by KubeVirt for this restore, controlled by the VM, from the snapshot's
//! VolumeSnapshot, bound); any failure before it ends in `Failed` with the old disks untouched,
//! and the reconciler puts the VM back on them. After it nothing ends the restore before every
//! disk is back: a lost or unproven restored claim, a disk name taken by a claim this restore
//! did not make (only the uid it made, recorded in its status, is the disk), a Machine gone,
//! each keeps the restore in `Adopting`, holding the Machine, with `data lost:` or `data at
//! risk:` and what to do. A MachineRestore carries a finalizer until it ended with every disk
//! present ([`done`]).

use std::collections::BTreeMap;

use crate::api::names::pvc_name;
use crate::api::snapshots::{MachineRestore, MachineSnapshot};
use crate::reconciler::apis::snapshot::VirtualMachineRestore;

pub use crate::api::snapshots::{holds, restore_phase as phase};
use crate::snapshots::context::NO_KUBEVIRT_SNAPSHOTS;

/// The Machine as the restore needs it.
#[derive(Clone, Debug, Default)]
pub struct MachineView {
    pub uid: String,
    /// Blank disks (plain claims `<machine>-<disk>`).
    pub disks: Vec<String>,
    /// Disks with a source (DataVolumes `<machine>-<disk>`; CDI fills the claim of that name).
    pub sourced: Vec<String>,
    /// CD-ROMs: read-only media imported from their source, nothing to restore; they stay on
    /// their DataVolumes.
    pub cdroms: Vec<String>,
    /// Whether the Machine's spec asks for a running VM now.
    pub wants_running: bool,
    /// It is being deleted.
    pub deleting: bool,
}

/// The Machine's VM.
#[derive(Clone, Debug, Default)]
pub struct VmView {
    pub uid: String,
    /// Its run strategy is not `Halted`.
    pub runs: bool,
    /// Claim names its volumes mount.
    pub claims: Vec<String>,
}

/// A claim or DataVolume: its uid, whether the Machine's evidence says it is the Machine's,
/// whether it is ready (a claim bound, a DataVolume succeeded), and what KubeVirt put on it.
#[derive(Clone, Debug, Default)]
pub struct ClaimView {
    pub uid: String,
    pub ours: bool,
    pub bound: bool,
    pub provenance: Provenance,
}

/// Everything one step is decided from.
#[derive(Clone, Debug, Default)]
pub struct Seen<'a> {
    pub restore: Option<&'a MachineRestore>,
    pub machine: Option<MachineView>,
    pub snapshot: Option<&'a MachineSnapshot>,
    /// The uid of the Machine the operator proves it took the snapshot of
    /// (`crate::snapshots::snapshot::taken_of`); `None`: nothing proves it.
    pub snapshot_proven_of: Option<String>,
    pub vm: Option<VmView>,
    pub vmi: bool,
    pub vm_restore: Option<&'a VirtualMachineRestore>,
    /// Claims in the namespace by name (the Machine's, CDI's of its DataVolumes, the restored).
    pub claims: BTreeMap<String, ClaimView>,
    /// The DataVolumes `<machine>-<disk>` of the disks with a source, by name.
    pub data_volumes: BTreeMap<String, ClaimView>,
    /// Another restore of the same Machine past `Pending` and not done: this one waits.
    pub another: Option<String>,
    /// KubeVirt's snapshot API was not found when the operator started.
    pub no_snapshot_api: bool,
    /// The Pod `<restore>-bind`, if any ([`binder`]).
    pub binder: Option<Binder>,
}

/// The consumer Pod that binds claims of a `WaitForFirstConsumer` class (see [`binder`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binder {
    pub name: String,
    pub uid: String,
    /// Controlled by this restore.
    pub ours: bool,
    pub deleting: bool,
}

/// One disk's claims during `Adopting`: the one restored and the uid of the one it replaces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskSwap {
    pub disk: String,
    pub restored: String,
    /// The uid of the claim (blank disk) or DataVolume (disk with a source) it replaces.
    pub previous_uid: Option<String>,
    pub data_volume: bool,
    /// The VolumeSnapshot KubeVirt restored it from, and the restored claim's uid (at the
    /// commit point).
    pub volume_snapshot: Option<String>,
    pub restored_uid: Option<String>,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do; show `phase` (and why it waits).
    Wait {
        phase: &'static str,
        why: Option<String>,
    },
    /// Halt the VM (it ran: remembered, to be started again).
    StopVm {
        was_running: bool,
    },
    /// Make the VirtualMachineRestore (once the VM is stopped).
    CreateVmRestore {
        overrides: Vec<(String, String)>,
    },
    /// Move on to `phase`.
    Advance(&'static str),
    /// Move on to `Adopting`, recording which claim of each disk is replaced.
    BeginAdopting(Vec<DiskSwap>),
    /// Delete the old claim (exactly that uid).
    DeleteClaim {
        name: String,
        uid: String,
    },
    /// Make `<machine>-<disk>` again, cloned from the restored claim.
    CreateClaim {
        name: String,
        from: String,
    },
    /// Delete the old DataVolume (exactly that uid; the garbage collector takes CDI's claim).
    DeleteDataVolume {
        name: String,
        uid: String,
    },
    /// Make the DataVolume `<machine>-<disk>` again, a CDI clone of the restored claim.
    CreateDataVolume {
        name: String,
        from: String,
    },
    Succeed,
    Fail(String),
    /// Remove the restore's finalizer: it ended with every disk present.
    Release,
    /// Make the consumer Pod mounting these claims, so the storage binds them.
    Bind(Vec<String>),
    /// Delete the consumer Pod (exactly that uid): every claim it mounted is bound.
    Unbind(String),
}

/// The restored claim of `disk` of Machine `machine` in restore `restore_uid`: a name of our
/// choice (KubeVirt's `volumeRestoreOverrides`), so every step can find it again.
pub fn restored_claim(machine: &str, disk: &str, restore_uid: &str) -> String {
    let short: String = restore_uid.chars().filter(|c| *c != '-').take(8).collect();
    format!("{}-restore-{short}", pvc_name(machine, disk))
}

/// The next step of the restore `s.restore` describes.
pub fn next(s: &Seen) -> Step {
    let Some(restore) = s.restore else {
        return Step::Wait {
            phase: phase::PENDING,
            why: None,
        };
    };
    let status = restore.status.clone().unwrap_or_default();
    let machine_name = restore.spec.machine_name.as_str();
    let restore_uid = restore.metadata.uid.as_deref().unwrap_or_default();
    let current = status.phase.as_deref().unwrap_or(phase::PENDING);
    // Past `Pending` the restore is of the Machine it began with: one made again under its name
    // is as good as gone.
    let pinned = status.machine_uid.as_deref();
    let machine = (s.machine.clone()).filter(|m| pinned.is_none_or(|uid| uid == m.uid));
    let s = &Seen {
        machine,
        ..s.clone()
    };
    if let Some(why) = stop_before_commit(s, restore, current) {
        return Step::Fail(why);
    }
    match current {
        phase::SUCCEEDED | phase::FAILED => done(s, current),
        phase::PENDING => pending(s, restore),
        phase::STOPPING if s.machine.is_none() => {
            Step::Fail(format!("Machine {machine_name} is gone"))
        }
        phase::STOPPING => match &s.vm {
            None => Step::Fail(format!("the VM {machine_name} is gone")),
            Some(vm) if vm.runs => Step::StopVm {
                was_running: status.was_running.unwrap_or(true),
            },
            Some(_) if s.vmi => Step::Wait {
                phase: phase::STOPPING,
                why: Some("waiting for the VM to stop".to_owned()),
            },
            Some(_) => Step::Advance(phase::RESTORING),
        },
        phase::RESTORING => restoring(s, machine_name, restore_uid),
        phase::ADOPTING => adopting(s, machine_name, restore_uid),
        phase::STARTING => starting(s, machine_name),
        other => Step::Fail(format!("unknown phase {other:?}")),
    }
}

/// Something found not the Machine's (`why`) in phase `current`: before the commit point the
/// restore fails, the old disks untouched; after it, it waits, holding the Machine; once ended
/// it does not matter (`None`).
pub fn refuse(current: Option<&str>, why: String) -> Option<Step> {
    match current.unwrap_or(phase::PENDING) {
        phase::SUCCEEDED | phase::FAILED => None,
        p @ (phase::ADOPTING | phase::STARTING) => Some(Step::Wait {
            phase: if p == phase::ADOPTING {
                phase::ADOPTING
            } else {
                phase::STARTING
            },
            why: Some(format!("data at risk: {why}")),
        }),
        _ => Some(Step::Fail(why)),
    }
}

/// Before any old disk is deleted a restore ends, the old disks untouched, when its
/// MachineRestore or Machine is deleted, or KubeVirt's snapshot API is not served.
fn stop_before_commit(s: &Seen, restore: &MachineRestore, current: &str) -> Option<String> {
    if !matches!(current, phase::PENDING | phase::STOPPING | phase::RESTORING) {
        return None;
    }
    let name = &restore.spec.machine_name;
    if restore.metadata.deletion_timestamp.is_some() {
        Some("the MachineRestore was deleted before any disk was replaced".to_owned())
    } else if s.machine.as_ref().is_some_and(|m| m.deleting) {
        Some(format!(
            "Machine {name} is being deleted: no disk was replaced"
        ))
    } else if s.no_snapshot_api {
        Some(NO_KUBEVIRT_SNAPSHOTS.to_owned())
    } else {
        None
    }
}

fn pending(s: &Seen, restore: &MachineRestore) -> Step {
    let machine_name = restore.spec.machine_name.as_str();
    let snapshot_name = restore.spec.snapshot_name.as_str();
    let Some(machine) = &s.machine else {
        return Step::Fail(format!("Machine {machine_name} not found"));
    };
    let Some(snapshot) = s.snapshot else {
        return Step::Fail(format!("MachineSnapshot {snapshot_name} not found"));
    };
    let snap_status = snapshot.status.clone().unwrap_or_default();
    if snapshot.spec.machine_name != machine_name {
        return Step::Fail(format!(
            "MachineSnapshot {snapshot_name} is a snapshot of another Machine"
        ));
    }
    if let Some(why) = earlier(s, restore, snap_status.machine_uid.as_deref(), &machine.uid) {
        return Step::Fail(why);
    }
    if let Some(other) = &s.another {
        return Step::Wait {
            phase: phase::PENDING,
            why: Some(format!(
                "MachineRestore {other} is restoring Machine {machine_name}"
            )),
        };
    }
    if snap_status.ready_to_use != Some(true) {
        return Step::Wait {
            phase: phase::PENDING,
            why: Some(format!(
                "MachineSnapshot {snapshot_name} is not ready to use"
            )),
        };
    }
    match &s.vm {
        None => Step::Wait {
            phase: phase::PENDING,
            why: Some(format!("Machine {machine_name} has no VM yet")),
        },
        Some(vm) => Step::StopVm {
            was_running: vm.runs || s.vmi,
        },
    }
}

/// Why a snapshot taken of Machine uid `taken_of` cannot be restored into the Machine `uid`:
/// one of an earlier Machine of the name only when the author allows it, and only when the
/// operator proves it took it of a Machine of that name (the uid a status says is not proof).
/// Everything after binds to the Machine restored into (`uid`): its uid is pinned, its VM must
/// control the restored claims.
fn earlier(
    s: &Seen,
    restore: &MachineRestore,
    taken_of: Option<&str>,
    uid: &str,
) -> Option<String> {
    let taken_of = taken_of.filter(|t| *t != uid)?;
    let (machine, snapshot) = (&restore.spec.machine_name, &restore.spec.snapshot_name);
    if !restore.spec.allow_earlier_machine {
        return Some(format!(
            "MachineSnapshot {snapshot} is a snapshot of an earlier Machine named {machine} \
             (uid {taken_of}); set spec.allowEarlierMachine: true to restore it into this one"
        ));
    }
    (s.snapshot_proven_of.as_deref() != Some(taken_of)).then(|| {
        format!(
            "MachineSnapshot {snapshot} is not proven taken by the operator of an earlier \
             Machine named {machine}: not restored"
        )
    })
}

pub mod binder;
mod done;
mod restoring;
pub use restoring::swaps;
use restoring::{restored_disks, restoring};
mod later;
pub mod proof;
use done::done;
pub use done::needs_finalizer;
use later::{adopting, starting};
pub use proof::Provenance;

#[cfg(test)]
mod tests;
