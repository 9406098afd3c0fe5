//! A Machine halted mid-restore, and a restored claim lost.

use crate::access::{fixture, wait_status};
use crate::snapshots::restore::{
    in_phase, kubevirt_completes, kubevirt_restores, restored_claim, stopped_for, undo,
};
use crate::snapshots::{
    NS, claims_of, dynamic, eventually, restore_phase, running_web, snapshot_of_web, still_up,
};
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubevirt_operator::api::snapshots::MachineRestore;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use serde_json::json;
use std::time::Duration;

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
