//! Which VolumeSnapshot holds each disk of a MachineSnapshot, for a clone from it
//! (`spec.cloneFrom.snapshot`), pure: each step judges one object the webhook read, in the order
//! it reads them (the MachineSnapshot, its Machine, its VirtualMachineSnapshot, that one's
//! content). Each `Err` is the reason the clone is refused.

use std::collections::BTreeMap;

use crate::api::Machine;
use crate::api::snapshots::{MachineSnapshot, snapshot_phase};
use crate::reconciler::apis::snapshot::{VirtualMachineSnapshot, VirtualMachineSnapshotContent};

/// The MachineSnapshot is one to clone from: Succeeded and ready, taken on the operator's own
/// cluster. Returns the name of its VirtualMachineSnapshot.
pub fn usable(snap: &MachineSnapshot) -> Result<&str, String> {
    let name = snap.metadata.name.as_deref().unwrap_or_default();
    let status = snap.status.as_ref();
    if let Some(cluster) = status.and_then(|s| s.cluster.as_deref()) {
        return Err(format!(
            "MachineSnapshot {name} was taken on the cluster of KubevirtConfig {cluster}: a clone \
             is made only from a snapshot of the operator's own cluster (its copies are there)"
        ));
    }
    let phase = status.and_then(|s| s.phase.as_deref());
    let ready = status.and_then(|s| s.ready_to_use) == Some(true);
    if phase != Some(snapshot_phase::SUCCEEDED) || !ready {
        return Err(format!(
            "MachineSnapshot {name} is not ready to use (phase {}): clone it once it has Succeeded",
            phase.unwrap_or("unset")
        ));
    }
    status
        .and_then(|s| s.virtual_machine_snapshot_name.as_deref())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("MachineSnapshot {name} names no VirtualMachineSnapshot"))
}

/// The Machine it was taken of still exists (`machine`, read by `spec.machineName`) and is that
/// very Machine, not a later one of its name: its disks and settings are what the clone copies.
pub fn taken_of<'m>(
    snap: &MachineSnapshot,
    machine: Option<&'m Machine>,
) -> Result<&'m Machine, String> {
    let name = snap.metadata.name.as_deref().unwrap_or_default();
    let of = &snap.spec.machine_name;
    let Some(machine) = machine else {
        return Err(format!(
            "MachineSnapshot {name} is of Machine {of}, which no longer exists: a clone takes \
             its disks' shapes and settings from that Machine"
        ));
    };
    let recorded = snap.status.as_ref().and_then(|s| s.machine_uid.as_deref());
    if recorded.is_none() || recorded != machine.metadata.uid.as_deref() {
        return Err(format!(
            "MachineSnapshot {name} is of an earlier Machine named {of}: a clone is made only \
             from a snapshot of a Machine that still exists"
        ));
    }
    Ok(machine)
}

/// The VirtualMachineSnapshot `vm_snapshot` is the one the MachineSnapshot controls (the
/// operator made it for that MachineSnapshot); returns its content's name.
pub fn content_name<'a>(
    snap: &MachineSnapshot,
    vm_snapshot: Option<&'a VirtualMachineSnapshot>,
) -> Result<&'a str, String> {
    let name = snap.metadata.name.as_deref().unwrap_or_default();
    let uid = snap.metadata.uid.as_deref();
    let controlled = vm_snapshot.is_some_and(|v| {
        (v.metadata.owner_references.iter().flatten())
            .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
    });
    if !controlled {
        return Err(format!(
            "MachineSnapshot {name} has no VirtualMachineSnapshot it controls"
        ));
    }
    vm_snapshot
        .and_then(|v| v.status.as_ref())
        .and_then(|s| s.virtual_machine_snapshot_content_name.as_deref())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("MachineSnapshot {name}'s VirtualMachineSnapshot names no content"))
}

/// Each volume's VolumeSnapshot in `content`, the content of VirtualMachineSnapshot
/// `vm_snapshot` (KubeVirt's `spec.volumeBackups`).
pub fn volumes(
    vm_snapshot: &str,
    content: Option<&VirtualMachineSnapshotContent>,
) -> Result<BTreeMap<String, String>, String> {
    let content = content
        .filter(|c| c.spec.virtual_machine_snapshot_name.as_deref() == Some(vm_snapshot))
        .ok_or_else(|| format!("the content of VirtualMachineSnapshot {vm_snapshot} is missing"))?;
    Ok((content.spec.volume_backups.iter())
        .filter_map(|b| {
            let snapshot = b
                .volume_snapshot_name
                .as_deref()
                .filter(|n| !n.is_empty())?;
            Some((b.volume_name.clone(), snapshot.to_owned()))
        })
        .collect())
}

#[cfg(test)]
mod tests;
