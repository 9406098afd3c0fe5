//! `Restoring`: KubeVirt writes every disk into a restored claim; each is proven before the
//! restore goes on to replace anything.

use std::collections::BTreeMap;

use super::binder;
use super::proof::{self, Unproven};
use super::{ClaimView, DiskSwap, MachineView, Seen, Step, phase, restored_claim};
use crate::api::names::pvc_name;
use crate::reconciler::apis::snapshot::VirtualMachineRestore;

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

pub(super) fn restoring(s: &Seen, machine_name: &str, restore_uid: &str) -> Step {
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
    let (mut missing, mut unbound) = (Vec::new(), Vec::new());
    for d in restored_disks(machine) {
        let name = restored_claim(machine_name, d, restore_uid);
        match proof::check(s, d, &name) {
            Ok(()) => {}
            Err(Unproven::Missing) => missing.push(d),
            Err(Unproven::Unbound(_)) => unbound.push(name),
            Err(Unproven::Foreign(why)) => return Step::Fail(why),
        }
    }
    if !missing.is_empty() {
        return Step::Fail(format!(
            "KubeVirt restored no claim for disk(s) {}",
            missing.join(", ")
        ));
    }
    // Nothing is deleted for a claim the storage has not bound (with WaitForFirstConsumer,
    // KubeVirt calls its restore complete before).
    let waiting = format!(
        "waiting for the restored claim(s) {} to bind",
        unbound.join(", ")
    );
    if let Some(step) = binder::bind(s, &unbound, phase::RESTORING, waiting) {
        return step;
    }
    let mut swaps = swaps(
        machine,
        machine_name,
        restore_uid,
        &s.claims,
        &s.data_volumes,
    );
    for swap in &mut swaps {
        swap.volume_snapshot = proof::reported_snapshot(s, &swap.disk);
        swap.restored_uid = s.claims.get(&swap.restored).map(|c| c.uid.clone());
    }
    Step::BeginAdopting(swaps)
}

/// The disks a restore takes back: blank ones, then those with a source (not the CD-ROMs).
pub(super) fn restored_disks(machine: &MachineView) -> impl Iterator<Item = &str> {
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
            ..DiskSwap::default()
        }
    };
    (machine.disks.iter().map(|d| swap(d, false)))
        .chain(machine.sourced.iter().map(|d| swap(d, true)))
        .collect()
}
