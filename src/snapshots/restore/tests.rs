use serde_json::json;

use super::*;
use crate::api::snapshots::{MachineRestoreStatus, RestoredDisk};

const UID: &str = "0a1b2c3d-4e5f";

fn restore(
    phase: Option<&str>,
    disks: Vec<RestoredDisk>,
    was_running: Option<bool>,
) -> MachineRestore {
    let mut r: MachineRestore = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineRestore",
        "metadata": {"name": "undo", "namespace": "ns", "uid": UID},
        "spec": {"machineName": "web", "snapshotName": "web-before"}
    }))
    .expect("restore");
    r.status = Some(MachineRestoreStatus {
        phase: phase.map(str::to_owned),
        disks,
        was_running,
        ..MachineRestoreStatus::default()
    });
    r
}

fn snapshot(machine: &str, machine_uid: &str, ready: bool) -> MachineSnapshot {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": "web-before", "namespace": "ns"},
        "spec": {"machineName": machine},
        "status": {"readyToUse": ready, "machineUid": machine_uid}
    }))
    .expect("snapshot")
}

fn vm_restore(status: serde_json::Value) -> VirtualMachineRestore {
    serde_json::from_value(json!({
        "apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineRestore",
        "metadata": {"name": "undo", "namespace": "ns"},
        "spec": {"target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "web"},
                 "virtualMachineSnapshotName": "web-before"},
        "status": status
    }))
    .expect("vm restore")
}

fn machine() -> MachineView {
    MachineView {
        uid: "uid-m".into(),
        disks: vec!["root".into(), "data".into()],
        sourced: vec![],
        cdroms: vec![],
        wants_running: true,
        ..MachineView::default()
    }
}

/// A Machine with a blank disk, a disk with a source and a CD-ROM.
fn imaged() -> MachineView {
    MachineView {
        uid: "uid-m".into(),
        disks: vec!["data".into()],
        sourced: vec!["root".into()],
        cdroms: vec!["iso".into()],
        wants_running: true,
        ..MachineView::default()
    }
}

fn vm(runs: bool, claims: &[&str]) -> VmView {
    VmView {
        uid: VM_UID.into(),
        runs,
        claims: claims.iter().map(|c| (*c).to_owned()).collect(),
    }
}

const VM_UID: &str = "uid-vm";

/// Claims (or DataVolumes) by name, bound; a restored one as KubeVirt makes it for `undo`.
fn claims(list: &[(&str, &str, bool)]) -> BTreeMap<String, ClaimView> {
    list.iter()
        .map(|(n, uid, ours)| {
            let restored = n.split_once("-restore-").map(|(disk, _)| kubevirts(disk));
            (
                (*n).to_owned(),
                ClaimView {
                    uid: (*uid).to_owned(),
                    ours: *ours,
                    bound: true,
                    provenance: restored.unwrap_or_default(),
                },
            )
        })
        .collect()
}

/// What KubeVirt puts on the restored claim of `web-<disk>` for `undo`.
fn kubevirts(claim: &str) -> Provenance {
    let disk = claim.trim_start_matches("web-");
    Provenance {
        restore_name: Some("undo".into()),
        controller_vm: Some(VM_UID.into()),
        volume_snapshot: Some(snap(disk)),
    }
}

fn snap(disk: &str) -> String {
    format!("vmsnapshot-web-before-{disk}")
}

/// KubeVirt's report of a complete restore of `disks`.
fn complete(disks: &[&str]) -> serde_json::Value {
    let restores: Vec<_> = (disks.iter())
        .map(|d| json!({"volumeName": d, "persistentVolumeClaim": r(d), "volumeSnapshotName": snap(d)}))
        .collect();
    json!({"complete": true, "restores": restores})
}

fn r(disk: &str) -> String {
    restored_claim("web", disk, UID)
}

#[test]
fn restored_claims_are_named_for_the_disk_and_the_restore() {
    assert_eq!(r("root"), "web-root-restore-0a1b2c3d");
}

#[test]
fn stopping_waits_for_the_vmi_then_restores_every_disk() {
    let stopping = restore(Some(phase::STOPPING), vec![], Some(true));
    let restoring = restore(Some(phase::RESTORING), vec![], Some(true));
    let seen = |r, vm_: VmView, vmi| Seen {
        restore: Some(r),
        machine: Some(machine()),
        vm: Some(vm_),
        vmi,
        ..Seen::default()
    };
    assert_eq!(
        next(&seen(&stopping, vm(true, &[]), true)),
        Step::StopVm { was_running: true },
        "reverted by someone: halted again"
    );
    assert!(matches!(
        next(&seen(&stopping, vm(false, &[]), true)),
        Step::Wait {
            phase: phase::STOPPING,
            ..
        }
    ));
    assert_eq!(
        next(&seen(&stopping, vm(false, &[]), false)),
        Step::Advance(phase::RESTORING)
    );
    assert_eq!(
        next(&seen(&restoring, vm(false, &[]), false)),
        Step::CreateVmRestore {
            overrides: vec![("root".into(), r("root")), ("data".into(), r("data"))]
        }
    );
    assert_eq!(
        next(&seen(&restoring, vm(true, &[]), false)),
        Step::Fail("the VM was started during the restore".into())
    );
    // A disk with a source is restored too; a CD-ROM is not (no override: never swapped).
    let imaged_seen = Seen {
        machine: Some(imaged()),
        ..seen(&restoring, vm(false, &[]), false)
    };
    assert_eq!(
        next(&imaged_seen),
        Step::CreateVmRestore {
            overrides: vec![("data".into(), r("data")), ("root".into(), r("root"))]
        }
    );
}

#[test]
fn restoring_follows_kubevirt_and_records_the_claims_it_replaces() {
    let restoring = restore(Some(phase::RESTORING), vec![], Some(true));
    let in_progress = vm_restore(json!({"complete": false}));
    let failed = vm_restore(json!({"complete": false, "conditions": [
        {"type": "Failure", "status": "True", "reason": "VolumeSnapshotMissing",
         "message": "snapshot web-before-root is gone"}]}));
    let done = vm_restore(complete(&["root", "data"]));
    let both = claims(&[
        ("web-root", "old-root", true),
        ("web-data", "old-data", true),
        (&r("root"), "new-root", false),
        (&r("data"), "new-data", false),
    ]);
    let seen = |vr, claims| Seen {
        restore: Some(&restoring),
        machine: Some(machine()),
        vm: Some(vm(false, &[])),
        vm_restore: Some(vr),
        claims,
        ..Seen::default()
    };
    assert!(matches!(
        next(&seen(&in_progress, both.clone())),
        Step::Wait {
            phase: phase::RESTORING,
            ..
        }
    ));
    assert_eq!(
        next(&seen(&failed, both.clone())),
        Step::Fail("KubeVirt could not restore the VM: snapshot web-before-root is gone".into())
    );
    assert_eq!(
        next(&seen(&done, both.clone())),
        Step::BeginAdopting(vec![
            DiskSwap {
                disk: "root".into(),
                restored: r("root"),
                previous_uid: Some("old-root".into()),
                data_volume: false,
                volume_snapshot: Some(snap("root")),
                restored_uid: Some("new-root".into()),
            },
            DiskSwap {
                disk: "data".into(),
                restored: r("data"),
                previous_uid: Some("old-data".into()),
                data_volume: false,
                volume_snapshot: Some(snap("data")),
                restored_uid: Some("new-data".into()),
            },
        ])
    );
    // A disk with a source: the DataVolume it replaces (not CDI's claim of it).
    let imaged_done = Seen {
        machine: Some(imaged()),
        claims: claims(&[
            ("web-data", "old-data", true),
            ("web-root", "cdi-root", false),
            (&r("root"), "new-root", false),
            (&r("data"), "new-data", false),
        ]),
        data_volumes: claims(&[("web-root", "old-root-dv", true)]),
        ..seen(&done, BTreeMap::new())
    };
    assert_eq!(
        next(&imaged_done),
        Step::BeginAdopting(vec![
            DiskSwap {
                disk: "data".into(),
                restored: r("data"),
                previous_uid: Some("old-data".into()),
                data_volume: false,
                volume_snapshot: Some(snap("data")),
                restored_uid: Some("new-data".into()),
            },
            DiskSwap {
                disk: "root".into(),
                restored: r("root"),
                previous_uid: Some("old-root-dv".into()),
                data_volume: true,
                volume_snapshot: Some(snap("root")),
                restored_uid: Some("new-root".into()),
            },
        ])
    );
    let one_missing = claims(&[
        ("web-root", "old-root", true),
        (&r("root"), "new-root", false),
    ]);
    assert_eq!(
        next(&seen(&done, one_missing)),
        Step::Fail("KubeVirt restored no claim for disk(s) data".into())
    );
}

mod binder;
mod earlier;
mod later;
mod pending;
mod trust;
