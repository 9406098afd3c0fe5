//! The steps of a MachineRestore, decided from what was observed (pure, tests in
//! `restore/tests.rs`).
//!
//! `Pending` → `Stopping` (the VM is halted and its VMI gone) → `Restoring` (one
//! VirtualMachineRestore writes every disk into a new claim; KubeVirt points the VM at them) →
//! `Adopting` (each old claim `<machine>-<disk>` of a blank disk is deleted and made again, with
//! the Machine's evidence, as a clone of its restored claim; each old DataVolume `<machine>-<disk>`
//! of a disk with a source is deleted and, once CDI's claim of it is gone, made again as a CDI
//! clone of its restored claim) → `Starting` (the reconciler writes the VM from the Machine again:
//! its volumes back on `<machine>-<disk>`, its run strategy as the spec says now) → `Succeeded`.
//! CD-ROMs are read-only media imported from their source: nothing of them is restored, their
//! DataVolumes are never touched. While `Stopping`, `Restoring` or `Adopting`, the Machine
//! reconciler holds its writes ([`holds`]). Any failure before an old disk is deleted ends in
//! `Failed` with the old disks untouched, and the reconciler puts the VM back on them. A restored
//! claim lost after its old disk was deleted keeps the restore in `Adopting`, holding the Machine
//! (nothing empty is made in place of the lost data) and saying so, until it is there again.

use std::collections::BTreeMap;

use crate::api::names::pvc_name;
use crate::api::snapshots::{MachineRestore, MachineSnapshot};
use crate::reconciler::apis::snapshot::VirtualMachineRestore;

pub use crate::api::snapshots::{holds, restore_phase as phase};

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
}

/// The Machine's VM.
#[derive(Clone, Debug, Default)]
pub struct VmView {
    /// Its run strategy is not `Halted`.
    pub runs: bool,
    /// Claim names its volumes mount.
    pub claims: Vec<String>,
}

/// A claim or DataVolume: its uid, and whether the Machine's evidence says it is the Machine's.
#[derive(Clone, Debug, Default)]
pub struct ClaimView {
    pub uid: String,
    pub ours: bool,
}

/// Everything one step is decided from.
#[derive(Clone, Debug, Default)]
pub struct Seen<'a> {
    pub restore: Option<&'a MachineRestore>,
    pub machine: Option<MachineView>,
    pub snapshot: Option<&'a MachineSnapshot>,
    pub vm: Option<VmView>,
    pub vmi: bool,
    pub vm_restore: Option<&'a VirtualMachineRestore>,
    /// Claims in the namespace by name (the Machine's, CDI's of its DataVolumes, the restored).
    pub claims: BTreeMap<String, ClaimView>,
    /// The DataVolumes `<machine>-<disk>` of the disks with a source, by name.
    pub data_volumes: BTreeMap<String, ClaimView>,
    /// Another restore of the same Machine past `Pending` and not done: this one waits.
    pub another: Option<String>,
}

/// One disk's claims during `Adopting`: the one restored and the uid of the one it replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskSwap {
    pub disk: String,
    pub restored: String,
    /// The uid of the claim (blank disk) or DataVolume (disk with a source) it replaces.
    pub previous_uid: Option<String>,
    pub data_volume: bool,
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
}

/// The restored claim of `disk` of Machine `machine` in restore `restore_uid`: a name of our
/// choice (KubeVirt's `volumeRestoreOverrides`), so every step can find it again.
pub fn restored_claim(machine: &str, disk: &str, restore_uid: &str) -> String {
    let short: String = restore_uid.chars().filter(|c| *c != '-').take(8).collect();
    format!("{}-restore-{short}", pvc_name(machine, disk))
}

fn vm_restore_failed(r: &VirtualMachineRestore) -> Option<String> {
    let conditions = &r.status.as_ref()?.conditions;
    let c = conditions
        .iter()
        .find(|c| c.type_ == "Failure" && c.status == "True")?;
    Some(
        c.message
            .clone()
            .or_else(|| c.reason.clone())
            .unwrap_or_else(|| "KubeVirt reports a failure".to_owned()),
    )
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
    match current {
        phase::SUCCEEDED | phase::FAILED => Step::Wait {
            phase: if current == phase::SUCCEEDED {
                phase::SUCCEEDED
            } else {
                phase::FAILED
            },
            why: None,
        },
        phase::PENDING => pending(s, restore),
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
    if snapshot.spec.machine_name != machine_name
        || snap_status
            .machine_uid
            .as_deref()
            .is_some_and(|uid| uid != machine.uid)
    {
        return Step::Fail(format!(
            "MachineSnapshot {snapshot_name} is a snapshot of another Machine"
        ));
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

fn restoring(s: &Seen, machine_name: &str, restore_uid: &str) -> Step {
    let Some(machine) = &s.machine else {
        return Step::Fail(format!("Machine {machine_name} is gone"));
    };
    let Some(vm_restore) = s.vm_restore else {
        if s.vmi || s.vm.as_ref().is_none_or(|vm| vm.runs) {
            return Step::Fail("the VM was started during the restore".to_owned());
        }
        // CD-ROMs get no override: they are never swapped (whatever KubeVirt restores of one
        // is left to it, and the VM mounts the CD-ROM's DataVolume again).
        let overrides = restored_disks(machine)
            .map(|d| (d.to_owned(), restored_claim(machine_name, d, restore_uid)))
            .collect();
        return Step::CreateVmRestore { overrides };
    };
    if let Some(why) = vm_restore_failed(vm_restore) {
        return Step::Fail(format!("KubeVirt could not restore the VM: {why}"));
    }
    let complete = vm_restore.status.as_ref().and_then(|st| st.complete) == Some(true);
    if !complete {
        return Step::Wait {
            phase: phase::RESTORING,
            why: Some("KubeVirt is restoring the disks".to_owned()),
        };
    }
    let missing: Vec<&str> = restored_disks(machine)
        .filter(|d| {
            let r = restored_claim(machine_name, d, restore_uid);
            !s.claims.contains_key(&r)
        })
        .collect();
    if !missing.is_empty() {
        return Step::Fail(format!(
            "KubeVirt restored no claim for disk(s) {}",
            missing.join(", ")
        ));
    }
    Step::BeginAdopting(swaps(
        machine,
        machine_name,
        restore_uid,
        &s.claims,
        &s.data_volumes,
    ))
}

/// The disks a restore takes back: blank ones, then those with a source (not the CD-ROMs).
fn restored_disks(machine: &MachineView) -> impl Iterator<Item = &str> {
    machine
        .disks
        .iter()
        .chain(&machine.sourced)
        .map(String::as_str)
}

/// The swaps of every disk: what to do with `<machine>-<disk>` (a claim, or a DataVolume for a
/// disk with a source), given the uid it had when `Adopting` began (kept in the restore's status).
pub fn swaps(
    machine: &MachineView,
    machine_name: &str,
    restore_uid: &str,
    claims: &BTreeMap<String, ClaimView>,
    data_volumes: &BTreeMap<String, ClaimView>,
) -> Vec<DiskSwap> {
    let swap = |d: &String, data_volume: bool| {
        let live = if data_volume { data_volumes } else { claims };
        DiskSwap {
            disk: d.clone(),
            restored: restored_claim(machine_name, d, restore_uid),
            previous_uid: live.get(&pvc_name(machine_name, d)).map(|c| c.uid.clone()),
            data_volume,
        }
    };
    (machine.disks.iter().map(|d| swap(d, false)))
        .chain(machine.sourced.iter().map(|d| swap(d, true)))
        .collect()
}

mod later;
use later::{adopting, starting};

#[cfg(test)]
mod tests;
