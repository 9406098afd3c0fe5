//! A restore replaces the disks; a failed one leaves them.

use crate::access::{fixture, wait_status};
use crate::snapshots::restore::{
    in_phase, kubevirt_completes, kubevirt_restores, stopped_for, undo,
};
use crate::snapshots::{
    NS, claims_of, dynamic, eventually, running_web, snapshot_of_web, still_up, uid,
};
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::snapshots::MachineRestore;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::snapshot::VirtualMachineRestore;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_replaces_the_disks_and_a_failed_one_leaves_them() {
    let mut env = fixture(&[]).start().await;
    let (admin, mut op) = env.take_replica().await;
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let vmrestores: Api<VirtualMachineRestore> = Api::namespaced(admin.clone(), NS);
    let (vm, machine_uid) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let mrestore_api = dynamic::<MachineRestore>(&admin);
    let old_root = pvcs.get("web-root").await.expect("web-root");
    let old_data = pvcs.get("web-data").await.expect("web-data");

    // A restore KubeVirt fails: the VM is stopped, then put back on its old disks.
    mrestore_api
        .create(&PostParams::default(), &undo("undo-fail", "web-before"))
        .await
        .expect("undo-fail");
    stopped_for(&admin, &op, "undo-fail").await;
    wait_status(&admin, NS, "web", &op, "Restoring shown", |s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Restoring" && c.status == "True")
    })
    .await;
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
    let failed = in_phase(&admin, &op, "undo-fail", "Failed").await;
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
    stopped_for(&admin, &op, "undo").await;
    // KubeVirt's restore controller: a claim per volume under the name asked for, from the
    // volume's VolumeSnapshot, and the VM pointed at them.
    let (vmrestore, restored) = kubevirt_restores(&admin, &op, "undo", &[]).await;
    let owner = &vmrestore.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(owner.uid, undo_ok.uid().expect("uid"));
    assert_eq!(
        restored.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>(),
        ["root", "data"]
    );
    // Several resyncs: the reconciler leaves the VM as KubeVirt's restore has it.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let held = vms.get("web").await.expect("VM");
    let restored_names: Vec<String> = restored.iter().map(|(_, c)| c.clone()).collect();
    assert_eq!(claims_of(&held), restored_names, "reverted mid-restore");
    assert_eq!(held.spec.run_strategy.as_deref(), Some("Halted"));
    kubevirt_completes(&admin, "undo", &restored).await;
    let done = in_phase(&admin, &op, "undo", "Succeeded").await;
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

    still_up(&mut op);
}
