//! What proves a restored claim is the one KubeVirt made for this restore, before anything is
//! deleted for it: its name is predictable (`restored_claim`), so its existence proves nothing.

use super::{ClaimView, Seen};

/// What KubeVirt's restore controller puts on a claim it restores, as observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Provenance {
    /// Its `restore.kubevirt.io/name` annotation: the VirtualMachineRestore it was made for.
    pub restore_name: Option<String>,
    /// The uid of the VirtualMachine its controller reference names.
    pub controller_vm: Option<String>,
    /// The VolumeSnapshot its `dataSource` names.
    pub volume_snapshot: Option<String>,
}

/// KubeVirt's annotation naming the VirtualMachineRestore a restored claim was made for.
pub const KUBEVIRT_RESTORE_ANNOTATION: &str = "restore.kubevirt.io/name";

/// Why claim `c` is not KubeVirt's restore of one disk for the VirtualMachineRestore `restore`
/// of the VM `vm_uid`, from the VolumeSnapshot `snapshot` (a user who may only create claims can
/// copy annotations, but cannot name a VM whose uid they cannot read); `None`: it is.
pub fn not_kubevirts(
    c: &ClaimView,
    restore: &str,
    vm_uid: Option<&str>,
    snapshot: Option<&str>,
) -> Option<String> {
    let p = &c.provenance;
    if p.restore_name.as_deref() != Some(restore) {
        return Some(format!(
            "its {KUBEVIRT_RESTORE_ANNOTATION} is not {restore}"
        ));
    }
    if vm_uid.is_none() || p.controller_vm.as_deref() != vm_uid {
        return Some("the Machine's VM does not control it".to_owned());
    }
    match snapshot {
        Some(snap) if p.volume_snapshot.as_deref() == Some(snap) => None,
        Some(snap) => Some(format!("its dataSource is not the VolumeSnapshot {snap}")),
        None => Some("KubeVirt names no VolumeSnapshot for it".to_owned()),
    }
}

/// Why a restored claim cannot stand for its disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unproven {
    /// It is not there.
    Missing,
    /// Not KubeVirt's for this restore (why).
    Foreign(String),
    /// KubeVirt's, not bound yet (why).
    Unbound(String),
}

/// Whether the restored claim `name` of `disk` can stand for the disk now: made by KubeVirt for
/// this restore (from the VolumeSnapshot recorded when adopting began, else as KubeVirt reports
/// it) and bound.
pub fn check(s: &Seen, disk: &str, name: &str) -> Result<(), Unproven> {
    let c = s.claims.get(name).ok_or(Unproven::Missing)?;
    let restore = s.restore.and_then(|r| r.metadata.name.as_deref());
    let recorded = (s.restore.and_then(|r| r.status.as_ref()).into_iter())
        .flat_map(|st| &st.disks)
        .find(|d| d.name == disk)
        .and_then(|d| d.volume_snapshot.clone());
    let snapshot = recorded.or_else(|| reported_snapshot(s, disk));
    let vm_uid = s.vm.as_ref().map(|vm| vm.uid.as_str());
    if let Some(why) = not_kubevirts(c, restore.unwrap_or_default(), vm_uid, snapshot.as_deref()) {
        return Err(Unproven::Foreign(format!(
            "the restored claim {name} is not KubeVirt's for this restore: {why}"
        )));
    }
    if !c.bound {
        return Err(Unproven::Unbound(format!(
            "the restored claim {name} is not bound"
        )));
    }
    Ok(())
}

/// The VolumeSnapshot KubeVirt reports restoring `disk` from.
pub fn reported_snapshot(s: &Seen, disk: &str) -> Option<String> {
    let status = s.vm_restore?.status.as_ref()?;
    (status.restores.iter())
        .find(|r| r.volume_name == disk && !r.volume_snapshot_name.is_empty())
        .map(|r| r.volume_snapshot_name.clone())
}
