//! Issue 21, restores end to end on a real control plane with `kubevirt-operator run`, playing
//! KubeVirt's VM, snapshot and restore controllers through the API server (KubeVirt's CRDs check
//! what is written): a restore KubeVirt fails leaves the old disks mounted and the VM running
//! again; a restore that succeeds stops the VM, is never reverted by the reconciler mid-way, and
//! ends with the VM running on claims `<machine>-<disk>` with new uids, controlled by the Machine,
//! proven its own and cloned from the restored claims.

mod access;
mod kubevirt;
mod snapshots;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use access::{setup, wait_status};
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::snapshots::MachineRestore;
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::snapshot::VirtualMachineRestore;
use snapshots::{
    NS, claims_of, dynamic, eventually, object, restore_phase, running_web, snapshot_of_web, uid,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_replaces_the_disks_and_a_failed_one_leaves_them() {
    let (_cp, admin, mut op) = setup(&[]).await;
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(admin.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let mrestores: Api<MachineRestore> = Api::namespaced(admin.clone(), NS);
    let vmrestores: Api<VirtualMachineRestore> = Api::namespaced(admin.clone(), NS);
    let (vm, machine_uid) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let mrestore_api = dynamic::<MachineRestore>(&admin);
    let undo = |name: &str, snap: &str| {
        object(
            "MachineRestore",
            name,
            json!({"machineName": "web", "snapshotName": snap}),
        )
    };

    let old_root = pvcs.get("web-root").await.expect("web-root");
    let old_data = pvcs.get("web-data").await.expect("web-data");

    // A restore KubeVirt fails: the VM is stopped, then put back on its old disks.
    mrestore_api
        .create(&PostParams::default(), &undo("undo-fail", "web-before"))
        .await
        .expect("undo-fail");
    let stopping = |name: &'static str| {
        let (vms, mrestores) = (vms.clone(), mrestores.clone());
        async move {
            let vm = vms.get("web").await.ok()?;
            let r = mrestores.get(name).await.ok()?;
            (vm.spec.run_strategy.as_deref() == Some("Halted")
                && restore_phase(&r) == Some("Stopping"))
            .then_some(())
        }
    };
    eventually("the VM halted for undo-fail", &op, || stopping("undo-fail")).await;
    wait_status(&admin, NS, "web", &op, "Restoring shown", |s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Restoring" && c.status == "True")
    })
    .await;
    vmis.delete("web", &DeleteParams::default())
        .await
        .expect("VMI gone"); // virt-controller
    let vmrestore = eventually("the VirtualMachineRestore of undo-fail", &op, || async {
        vmrestores.get_opt("undo-fail").await.ok().flatten()
    })
    .await;
    assert_eq!(vmrestore.spec.target.name, "web");
    assert_eq!(vmrestore.spec.virtual_machine_snapshot_name, "web-before");
    vmrestores
        .patch_status(
            "undo-fail",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"complete": false, "conditions": [
                {"type": "Failure", "status": "True", "reason": "VolumeSnapshotMissing",
                 "message": "VolumeSnapshot vmsnapshot-web-before-root is gone"}]}})),
        )
        .await
        .expect("VirtualMachineRestore failure");
    let failed = eventually("undo-fail Failed", &op, || async {
        let r = mrestores.get("undo-fail").await.ok()?;
        (restore_phase(&r) == Some("Failed")).then_some(r)
    })
    .await;
    let error = failed.status.and_then(|s| s.error).unwrap_or_default();
    assert!(
        error.contains("vmsnapshot-web-before-root is gone"),
        "{error}"
    );
    eventually("the VM running again on its old disks", &op, || async {
        let vm = vms.get("web").await.ok()?;
        (vm.spec.run_strategy.as_deref() == Some("Always")
            && claims_of(&vm) == ["web-root", "web-data"])
        .then_some(())
    })
    .await;
    assert_eq!(
        uid(&pvcs.get("web-root").await.expect("web-root")),
        uid(&old_root)
    );
    assert_eq!(
        uid(&pvcs.get("web-data").await.expect("web-data")),
        uid(&old_data)
    );
    wait_status(&admin, NS, "web", &op, "Restoring gone", |s| {
        !s.conditions.iter().any(|c| c.type_ == "Restoring")
    })
    .await;

    // A restore that succeeds.
    kubevirt::vmi(&admin, NS, "web", json!({"phase": "Running"})).await; // virt-controller again
    let undo_ok = mrestore_api
        .create(&PostParams::default(), &undo("undo", "web-before"))
        .await
        .expect("undo");
    eventually("the VM halted for undo", &op, || stopping("undo")).await;
    vmis.delete("web", &DeleteParams::default())
        .await
        .expect("VMI gone");
    let vmrestore = eventually("the VirtualMachineRestore of undo", &op, || async {
        vmrestores.get_opt("undo").await.ok().flatten()
    })
    .await;
    let owner = &vmrestore.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(owner.uid, undo_ok.uid().expect("uid"));
    // KubeVirt's restore controller: a claim per volume under the name asked for, from the
    // volume's VolumeSnapshot, and the VM pointed at them.
    let mut restored = Vec::new();
    for o in &vmrestore.spec.volume_restore_overrides {
        let name = o.restore_name.clone().expect("a restore name");
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}},
                     "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                    "name": format!("vmsnapshot-web-before-{}", o.volume_name)}}
        }))
        .expect("claim");
        pvcs.create(&PostParams::default(), &claim)
            .await
            .expect("restored claim");
        restored.push((o.volume_name.clone(), name));
    }
    assert_eq!(
        restored.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>(),
        ["root", "data"]
    );
    let volumes: Vec<Value> = restored
        .iter()
        .map(|(v, c)| json!({"name": v, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    vms.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"volumes": volumes}}}})),
    )
    .await
    .expect("VM on the restored claims");
    // Several resyncs: the reconciler leaves the VM as KubeVirt's restore has it.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let held = vms.get("web").await.expect("VM");
    let restored_names: Vec<String> = restored.iter().map(|(_, c)| c.clone()).collect();
    assert_eq!(claims_of(&held), restored_names, "reverted mid-restore");
    assert_eq!(held.spec.run_strategy.as_deref(), Some("Halted"));
    vmrestores
        .patch_status(
            "undo",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"complete": true, "restores": restored.iter().map(|(v, c)| json!({
                "volumeName": v, "persistentVolumeClaim": c,
                "volumeSnapshotName": format!("vmsnapshot-web-before-{v}")})).collect::<Vec<_>>()}})),
        )
        .await
        .expect("VirtualMachineRestore complete");
    let done = eventually("undo Succeeded", &op, || async {
        let r = mrestores.get("undo").await.ok()?;
        (restore_phase(&r) == Some("Succeeded")).then_some(r)
    })
    .await;
    assert!(done.status.and_then(|s| s.completed_at).is_some());
    let vm = vms.get("web").await.expect("VM");
    assert_eq!(claims_of(&vm), ["web-root", "web-data"]);
    assert_eq!(
        vm.spec.run_strategy.as_deref(),
        Some("Always"),
        "started again"
    );
    for ((disk, from), old) in restored.iter().zip([&old_root, &old_data]) {
        let claim = pvcs.get(&format!("web-{disk}")).await.expect("claim");
        assert_ne!(uid(&claim), uid(old), "{disk}: a new claim");
        let owner = &claim.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            (machine_uid.as_str(), Some(true))
        );
        assert!(claim.annotations().contains_key(PROOF_ANNOTATION), "{disk}");
        let source = claim
            .spec
            .as_ref()
            .and_then(|s| s.data_source.as_ref())
            .expect("dataSource");
        assert_eq!(
            (source.kind.as_str(), source.name.as_str()),
            ("PersistentVolumeClaim", from.as_str())
        );
    }
    wait_status(
        &admin,
        NS,
        "web",
        &op,
        "Restoring gone after the restore",
        |s| !s.conditions.iter().any(|c| c.type_ == "Restoring"),
    )
    .await;

    assert!(
        op.exited().is_none(),
        "the operator exited\n{}",
        op.log_tail(80)
    );
}
