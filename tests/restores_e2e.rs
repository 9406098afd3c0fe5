//! Issue 21, restores end to end on a real control plane with `kubevirt-operator run`, playing
//! KubeVirt's VM, snapshot and restore controllers through the API server (KubeVirt's CRDs check
//! what is written): a restore KubeVirt fails leaves the old disks mounted and the VM running
//! again; a restore that succeeds stops the VM, is never reverted by the reconciler mid-way, and
//! ends with the VM running on claims `<machine>-<disk>` with new uids, controlled by the Machine,
//! proven its own and cloned from the restored claims. A Machine with a blank disk, a disk with a
//! source and a CD-ROM is restored too (playing CDI as well: the disk's DataVolume is made again
//! as a clone of its restored claim, the CD-ROM's is left alone); a Machine halted by its user
//! during a restore ends restored and halted; a restored claim lost after its old claim was
//! deleted holds the Machine, says so, and nothing empty is made in its place.

mod access;
mod kubevirt;
mod snapshots;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use access::{fixture, wait_status};
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::snapshots::MachineRestore;
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::snapshot::VirtualMachineRestore;
use kubevirt_operator::reconciler::decide::held::mounted;
use snapshots::restore::{
    cdi_fills, in_phase, kubevirt_completes, kubevirt_restores, restored_claim, stopped_for, undo,
};
use snapshots::{
    NS, claims_of, dynamic, eventually, object, restore_phase, running_web, snapshot_of_web,
    still_up, uid,
};

const IMAGE: &str =
    "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-generic-amd64.qcow2";
const ISO: &str = "https://cdimage.debian.org/debian-cd/current/amd64/iso-cd/debian-netinst.iso";

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_with_a_source_is_restored_and_a_cdrom_left_on_its_image() {
    // The garbage collector takes CDI's old claim.
    let mut env = fixture(&[]).with_controller_manager().start().await;
    let (admin, mut op) = env.take_replica().await;
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let dvs: Api<DataVolume> = Api::namespaced(admin.clone(), NS);
    let web = object(
        "Machine",
        "web",
        json!({"template": "small",
               "disks": [{"name": "root", "size": "20Gi", "source": {"http": {"url": IMAGE}}},
                         {"name": "data", "size": "1Gi"}],
               "cdroms": [{"name": "iso", "source": {"http": {"url": ISO}}}]}),
    );
    let machine = access::create_admitted(&access::machines(&admin, NS), &web, &op).await;
    let machine_uid = machine.uid().expect("uid");
    // CDI imports both images.
    let old_root = cdi_fills(&admin, &op, "web-root", "20Gi").await;
    let old_iso = cdi_fills(&admin, &op, "web-iso", "1Gi").await;
    let vm = eventually("web's VM on its disks", &op, || async {
        let vm = vms.get_opt("web").await.ok().flatten()?;
        (mounted(&vm) == ["web-root", "web-data", "web-iso"]).then_some(vm)
    })
    .await;
    kubevirt::vmi(&admin, NS, "web", json!({"phase": "Running"})).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let old_data = pvcs.get("web-data").await.expect("web-data");
    let old_cdi_root = pvcs.get("web-root").await.expect("CDI's web-root");

    dynamic::<MachineRestore>(&admin)
        .create(&PostParams::default(), &undo("undo", "web-before"))
        .await
        .expect("undo");
    stopped_for(&admin, &op, "undo").await;
    // The CD-ROM is in the snapshot too: KubeVirt restores it under its own name.
    let (_, restored) = kubevirt_restores(&admin, &op, "undo", &["iso"]).await;
    let names: Vec<&str> = restored.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(names, ["data", "root", "iso"], "no override for the CD-ROM");
    let restored_root = restored[1].1.clone();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let held = vms.get("web").await.expect("VM");
    let mut on_restored: Vec<String> = restored.iter().map(|(_, c)| c.clone()).collect();
    let mut mounts = claims_of(&held);
    on_restored.sort();
    mounts.sort();
    assert_eq!(mounts, on_restored, "reverted mid-restore");
    kubevirt_completes(&admin, "undo", &restored).await;

    // The DataVolume is made again as a clone of its restored claim, after the old one and
    // CDI's claim of it are gone; CDI (the test) fills it.
    let new_root = eventually("web-root made again", &op, || async {
        let dv = dvs.get_opt("web-root").await.ok().flatten()?;
        (dv.uid() != old_root.uid()).then_some(dv)
    })
    .await;
    let pvc = new_root.spec.source.as_ref().and_then(|s| s.pvc.as_ref());
    assert_eq!(
        pvc.map(|p| (p.namespace.as_str(), p.name.as_str())),
        Some((NS, restored_root.as_str())),
        "a clone of the restored claim"
    );
    assert_eq!(
        (new_root.spec.storage.as_ref()).and_then(|s| s
            .resources
            .as_ref()?
            .requests
            .get("storage")
            .cloned()),
        Some("20Gi".to_owned()),
        "the size of the disk it replaces"
    );
    let owner = &new_root.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        (machine_uid.as_str(), Some(true))
    );
    assert!(new_root.annotations().contains_key(PROOF_ANNOTATION));
    assert_eq!(
        (new_root.labels().get("vitistack.io/machine")).map(String::as_str),
        Some("web")
    );
    assert!(
        pvcs.get_opt("web-root").await.expect("claim").is_none(),
        "CDI's old claim went with its DataVolume"
    );
    cdi_fills(&admin, &op, "web-root", "20Gi").await;
    in_phase(&admin, &op, "undo", "Succeeded").await;
    let vm = vms.get("web").await.expect("VM");
    assert_eq!(mounted(&vm), ["web-root", "web-data", "web-iso"]);
    assert_eq!(
        vm.spec.run_strategy.as_deref(),
        Some("Always"),
        "started again"
    );
    let data = pvcs.get("web-data").await.expect("web-data");
    assert_ne!(uid(&data), uid(&old_data));
    let from = data.spec.as_ref().and_then(|s| s.data_source.as_ref());
    assert_eq!(from.map(|f| f.name.as_str()), Some(restored[0].1.as_str()));
    let cdi_root = pvcs.get("web-root").await.expect("CDI's new web-root");
    assert_ne!(uid(&cdi_root), uid(&old_cdi_root));
    // The CD-ROM: its DataVolume untouched; KubeVirt's copy of it neither adopted nor mounted.
    let iso = dvs.get("web-iso").await.expect("web-iso");
    assert_eq!(iso.uid(), old_iso.uid());
    assert!(pvcs.get_opt(&restored[2].1).await.expect("claim").is_some());

    // Several resyncs later the reconciler keeps the clone as it is: not made again (it would
    // import the image over the restored data), no conflict.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let still = dvs.get("web-root").await.expect("web-root");
    assert_eq!(still.uid(), new_root.uid());
    assert_eq!(still.spec.source, new_root.spec.source);
    let status = wait_status(&admin, NS, "web", &op, "the storage reported", |s| {
        s.conditions.iter().any(|c| c.type_ == "StorageReady")
    })
    .await;
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.reason.contains("Conflict")),
        "{:?}",
        status.conditions
    );
    still_up(&mut op);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_halted_during_its_restore_ends_restored_and_halted() {
    let mut env = fixture(&[]).start().await;
    let (admin, mut op) = env.take_replica().await;
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let (vm, _) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let restores = dynamic::<MachineRestore>(&admin);
    let machines = access::machines(&admin, NS);

    // The user halts the Machine while its restore runs: the restore ends, and the VM stays
    // halted on the restored disks.
    restores
        .create(&PostParams::default(), &undo("undo", "web-before"))
        .await
        .expect("undo");
    stopped_for(&admin, &op, "undo").await;
    let (_, restored) = kubevirt_restores(&admin, &op, "undo", &[]).await;
    machines
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"runStrategy": "Halted", "running": null}})),
        )
        .await
        .expect("halted by its user");
    kubevirt_completes(&admin, "undo", &restored).await;
    in_phase(&admin, &op, "undo", "Succeeded").await;
    let vm = vms.get("web").await.expect("VM");
    assert_eq!(claims_of(&vm), ["web-root", "web-data"]);
    assert_eq!(vm.spec.run_strategy.as_deref(), Some("Halted"));
    still_up(&mut op);
}

/// A restored claim lost after the old claim was deleted (held by a finalizer until the restored
/// one is gone): the restore holds the Machine and says so; nothing is made in its place; made
/// again by an admin, the restore goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_claim_lost_after_its_old_claim_was_deleted_is_never_made_empty() {
    let mut env = fixture(&[]).start().await;
    let (admin, mut op) = env.take_replica().await;
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let (vm, _) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let hold = json!({"metadata": {"finalizers": ["test.vitistack.io/hold"]}});
    pvcs.patch("web-root", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .expect("finalizer");
    dynamic::<MachineRestore>(&admin)
        .create(&PostParams::default(), &undo("again", "web-before"))
        .await
        .expect("again");
    stopped_for(&admin, &op, "again").await;
    let (_, restored) = kubevirt_restores(&admin, &op, "again", &[]).await;
    kubevirt_completes(&admin, "again", &restored).await;
    eventually("the old web-root deleted", &op, || async {
        let c = pvcs.get("web-root").await.ok()?;
        c.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    let restored_root = restored[0].1.clone();
    pvcs.delete(&restored_root, &DeleteParams::default())
        .await
        .expect("restored claim lost");
    let release = json!({"metadata": {"finalizers": null}});
    pvcs.patch("web-root", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .expect("finalizer gone");
    let lost = eventually("again reports the loss", &op, || async {
        let r = Api::<MachineRestore>::namespaced(admin.clone(), NS)
            .get("again")
            .await
            .ok()?;
        let error = r.status.as_ref()?.error.clone()?;
        error.starts_with("data lost").then_some(r)
    })
    .await;
    assert_eq!(restore_phase(&lost), Some("Adopting"));
    let error = lost.status.and_then(|s| s.error).unwrap_or_default();
    assert!(
        error.contains(&restored_root) && error.contains("web-before"),
        "{error}"
    );
    let status = wait_status(&admin, NS, "web", &op, "Restoring names the loss", |s| {
        s.conditions.iter().any(|c| {
            c.type_ == "Restoring" && c.status == "True" && c.message.contains("data lost")
        })
    })
    .await;
    assert!(!status.conditions.is_empty());
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        pvcs.get_opt("web-root").await.expect("claim").is_none(),
        "nothing empty made in place of the lost data"
    );
    let vm = vms.get("web").await.expect("VM");
    assert!(
        claims_of(&vm).contains(&restored_root),
        "the VM left as the restore has it"
    );
    // An admin makes the restored claim again (from the snapshot): the restore goes on.
    restored_claim(&admin, &restored_root, "root").await;
    in_phase(&admin, &op, "again", "Succeeded").await;
    let root = pvcs.get("web-root").await.expect("web-root");
    let from = root.spec.as_ref().and_then(|s| s.data_source.as_ref());
    assert_eq!(from.map(|f| f.name.as_str()), Some(restored_root.as_str()));
    let vm = vms.get("web").await.expect("VM");
    assert_eq!(claims_of(&vm), ["web-root", "web-data"]);
    still_up(&mut op);
}
