//! Issue 32, a restore a user can bet the data on, on a real control plane with
//! `kubevirt-operator run`, KubeVirt's restore controller, CDI and the storage played through the
//! API server: a claim planted under the restored claim's predictable name, or under the disk's
//! own name between its deletion and its making again (by a user who may only create claims,
//! with the made-for proof copied), is never mounted; once an old disk is deleted, nothing frees
//! the Machine before every disk is back: not a leader that starts without KubeVirt's snapshot
//! API, not deleting the MachineRestore, not deleting the (retain-disks) Machine; a restore that
//! succeeded deletes its restored claims unless asked to keep them; a WaitForFirstConsumer class
//! restores and boots (the restore binds its claims with a consumer Pod of its own, running the
//! pause image from `--restore-pause-image`).

mod access;
mod kubevirt;
mod snapshots;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use access::{OP_NS, fixture, start_replica};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::snapshots::MachineRestore;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::snapshot::VirtualMachineRestore;
use snapshots::restore::{
    WFFC, in_phase, kubevirt_completes, kubevirt_restores_in, restored_claim, stopped_for, undo,
};
use snapshots::trust::{
    MALLORY, adopting_held, data_source, mallory, name_of, only_its_consumer_pod, planted, release,
    unwatched,
};
use snapshots::{NS, claims_of, dynamic, eventually, restore_phase, running_web, snapshot_of_web};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_planted_under_the_restored_name_is_never_mounted() {
    let mut env = mallory(fixture(&[])).start().await;
    let (admin, mut op) = env.take_replica().await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let (vm, _) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let old_root = pvcs.get("web-root").await.expect("web-root");
    let mallory = env.client_of(MALLORY).await;
    dynamic::<MachineRestore>(&admin)
        .create(&PostParams::default(), &undo("undo", "web-before"))
        .await
        .expect("undo");
    stopped_for(&admin, &op, "undo").await;
    let vmrestores: Api<VirtualMachineRestore> = Api::namespaced(admin.clone(), NS);
    let vmrestore = eventually("the VirtualMachineRestore", &op, || async {
        vmrestores.get_opt("undo").await.ok().flatten()
    })
    .await;
    // The name asked of KubeVirt for root is predictable: Mallory is first, with the made-for
    // proof of web-root and KubeVirt's restore annotation copied.
    let asked = (vmrestore.spec.volume_restore_overrides.iter())
        .find(|o| o.volume_name == "root")
        .and_then(|o| o.restore_name.clone())
        .expect("root's restored claim");
    let mut annotations = json!({"restore.kubevirt.io/name": "undo"});
    annotations[PROOF_ANNOTATION] = json!(old_root.annotations()[PROOF_ANNOTATION]);
    Api::<PersistentVolumeClaim>::namespaced(mallory, NS)
        .create(
            &PostParams::default(),
            &planted(&asked, annotations, json!({})),
        )
        .await
        .expect("mallory may create claims");
    // KubeVirt finds a claim of that name and uses it; it makes data's.
    let data = (vmrestore.spec.volume_restore_overrides.iter())
        .find(|o| o.volume_name == "data")
        .and_then(|o| o.restore_name.clone())
        .expect("data's restored claim");
    snapshots::restore::play_storage(&admin);
    restored_claim(&admin, &data, "data").await;
    let restored = vec![
        ("root".to_owned(), asked.clone()),
        ("data".to_owned(), data),
    ];
    kubevirt_completes(&admin, "undo", &restored).await;

    let failed = in_phase(&admin, &op, "undo", "Failed").await;
    let error = failed.status.and_then(|s| s.error).unwrap_or_default();
    assert!(error.contains(&asked), "{error}");
    eventually("the VM back on its old disks", &op, || async {
        let vm = vms.get("web").await.ok()?;
        (claims_of(&vm) == ["web-root", "web-data"]).then_some(())
    })
    .await;
    let root = pvcs.get("web-root").await.expect("web-root");
    assert_eq!(root.uid(), old_root.uid(), "the old disk kept");
    snapshots::still_up(&mut op);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_planted_under_the_disk_name_is_never_mounted() {
    let mut env = mallory(fixture(&[])).start().await;
    let (admin, op) = env.take_replica().await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let (vm, _) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let old_root = pvcs.get("web-root").await.expect("web-root");
    let mallory = env.client_of(MALLORY).await;
    // It keeps its restored claims when done.
    let mut restore = serde_json::to_value(undo("undo", "web-before")).expect("json");
    restore["spec"]["keepRestoredClaims"] = json!(true);
    let restored = adopting_held(&admin, &op, restore, "undo").await;
    // The operator is down while the old web-root goes; Mallory makes web-root with its labels
    // and made-for proof copied.
    drop(op);
    release(&pvcs, "web-root").await;
    unwatched("the old web-root gone", || async {
        pvcs.get_opt("web-root").await.ok()?.is_none().then_some(())
    })
    .await;
    let planted = planted(
        "web-root",
        json!({PROOF_ANNOTATION: old_root.annotations()[PROOF_ANNOTATION]}),
        json!(old_root.labels()),
    );
    let planted = Api::<PersistentVolumeClaim>::namespaced(mallory, NS)
        .create(&PostParams::default(), &planted)
        .await
        .expect("mallory may create claims");
    let (mut op, _) = start_replica(&env, OP_NS, "second", &[]).await;
    let held = eventually("the restore refuses the planted claim", &op, || async {
        let r = Api::<MachineRestore>::namespaced(admin.clone(), NS)
            .get("undo")
            .await
            .ok()?;
        let error = r.status.as_ref()?.error.clone()?;
        (error.starts_with("data at risk") && error.contains("web-root")).then_some(r)
    })
    .await;
    assert_eq!(restore_phase(&held), Some("Adopting"));
    let vm = vms.get("web").await.expect("VM");
    assert!(!claims_of(&vm).contains(&"web-root".to_owned()), "mounted");
    // An admin deletes it: the restore makes web-root from the restored claim and goes on.
    pvcs.delete("web-root", &DeleteParams::default())
        .await
        .expect("planted claim deleted");
    in_phase(&admin, &op, "undo", "Succeeded").await;
    let root = pvcs.get("web-root").await.expect("web-root");
    assert_ne!(root.uid(), planted.uid());
    assert_eq!(data_source(&root), Some(restored[0].1.clone()));
    let recorded = Api::<MachineRestore>::namespaced(admin.clone(), NS)
        .get("undo")
        .await
        .expect("undo");
    let made: Vec<Option<String>> = (recorded.status.iter().flat_map(|s| &s.disks))
        .map(|d| d.made_uid.clone())
        .collect();
    assert!(made.contains(&root.uid()), "{made:?}");
    for (_, from) in &restored {
        assert!(
            pvcs.get_opt(from).await.expect("claim").is_some(),
            "{from} kept"
        );
    }
    snapshots::still_up(&mut op);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_without_the_snapshot_api_never_fails_an_adopting_restore() {
    let mut env = fixture(&[]).start().await;
    let (admin, op) = env.take_replica().await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let (vm, _) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let restore = serde_json::to_value(undo("undo", "web-before")).expect("json");
    let restored = adopting_held(&admin, &op, restore, "undo").await;
    // A new leader starts while KubeVirt's restore API is not served.
    drop(op);
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd = "virtualmachinerestores.snapshot.kubevirt.io";
    crds.delete(crd, &DeleteParams::default())
        .await
        .expect("CRD deleted");
    unwatched("the restore API gone", || async {
        crds.get_opt(crd).await.ok()?.is_none().then_some(())
    })
    .await;
    let (mut op, _) = start_replica(&env, OP_NS, "second", &[]).await;
    release(&pvcs, "web-root").await;
    let done = eventually("the restore ends", &op, || async {
        let r = Api::<MachineRestore>::namespaced(admin.clone(), NS)
            .get("undo")
            .await
            .ok()?;
        matches!(restore_phase(&r), Some("Succeeded" | "Failed")).then_some(r)
    })
    .await;
    assert_eq!(restore_phase(&done), Some("Succeeded"), "{:?}", done.status);
    let root = pvcs.get("web-root").await.expect("web-root");
    assert_eq!(
        data_source(&root),
        Some(restored[0].1.clone()),
        "never empty"
    );
    snapshots::still_up(&mut op);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_machinerestore_mid_adopting_waits_for_every_disk() {
    let mut env = fixture(&[]).start().await;
    let (admin, mut op) = env.take_replica().await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let (vm, _) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let restore = serde_json::to_value(undo("undo", "web-before")).expect("json");
    let restored = adopting_held(&admin, &op, restore, "undo").await;
    let mrestores: Api<MachineRestore> = Api::namespaced(admin.clone(), NS);
    mrestores
        .delete("undo", &DeleteParams::default())
        .await
        .expect("deleted");
    let going = mrestores.get_opt("undo").await.expect("get");
    assert!(
        going.is_some_and(|r| r.metadata.deletion_timestamp.is_some()),
        "a restore past its commit point is held by its finalizer"
    );
    release(&pvcs, "web-root").await;
    eventually("the restore done, then gone", &op, || async {
        mrestores
            .get_opt("undo")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    for (disk, from) in &restored {
        let c = pvcs.get(name_of(disk)).await.expect("disk");
        assert_eq!(data_source(&c), Some(from.clone()), "{disk} restored");
    }
    // Done: its restored claims are deleted (it kept none).
    eventually("the restored claims deleted", &op, || async {
        for (_, from) in &restored {
            if pvcs
                .get_opt(from)
                .await
                .ok()?
                .is_some_and(|c| c.metadata.deletion_timestamp.is_none())
            {
                return None;
            }
        }
        Some(())
    })
    .await;
    snapshots::still_up(&mut op);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_retain_disks_machine_mid_restore_waits_for_the_restore() {
    // The garbage collector, as in a cluster.
    let mut env = fixture(&[]).with_controller_manager().start().await;
    let (admin, mut op) = env.take_replica().await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(admin.clone(), NS);
    let (vm, _) = running_web(&admin, &op).await;
    machines
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"vitistack.io/retain-disks": "true"}}}),
            ),
        )
        .await
        .expect("retain-disks");
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let restore = serde_json::to_value(undo("undo", "web-before")).expect("json");
    let restored = adopting_held(&admin, &op, restore, "undo").await;
    machines
        .delete("web", &DeleteParams::default())
        .await
        .expect("Machine deleted");
    // Several reconciles of the deleted Machine: its VM (which owns the restored claims) stays
    // while the restore holds it. A window, not a wait for a state: the operator resyncs every
    // 2 s (`--reconcile-interval 2s`) and reacts to the deletion at once, so 6 s hold several.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        vms.get_opt("web").await.expect("VM").is_some(),
        "VM deleted mid-restore"
    );
    for (_, from) in &restored {
        assert!(
            pvcs.get_opt(from).await.expect("claim").is_some(),
            "{from} lost"
        );
    }
    release(&pvcs, "web-root").await;
    eventually("the Machine gone after its restore", &op, || async {
        machines.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    let done = Api::<MachineRestore>::namespaced(admin.clone(), NS)
        .get("undo")
        .await
        .expect("undo");
    assert_eq!(restore_phase(&done), Some("Succeeded"), "{:?}", done.status);
    for (disk, from) in &restored {
        let c = pvcs.get(name_of(disk)).await.expect("retained disk");
        assert_eq!(
            data_source(&c),
            Some(from.clone()),
            "{disk} restored and kept"
        );
    }
    snapshots::still_up(&mut op);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_first_consumer_class_restores_and_boots() {
    // An air-gapped cluster: the pause image from its own mirror.
    let mirror = "mirror.example.com:5000/k8s/pause:3.10";
    let mut env = fixture(&["--restore-pause-image", mirror]).start().await;
    let (admin, mut op) = env.take_replica().await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let (vm, _) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let undo_ = dynamic::<MachineRestore>(&admin)
        .create(&PostParams::default(), &undo("undo", "web-before"))
        .await
        .expect("undo");
    stopped_for(&admin, &op, "undo").await;
    // KubeVirt restores into claims of a WaitForFirstConsumer class and calls it complete while
    // they are unbound; only a pod mounting them makes the storage bind them.
    let (_, restored) = kubevirt_restores_in(&admin, &op, "undo", &[], Some(WFFC)).await;
    kubevirt_completes(&admin, "undo", &restored).await;
    let mounted = |p: &Pod| -> Vec<String> {
        (p.spec.iter().flat_map(|s| s.volumes.iter().flatten()))
            .filter_map(|v| Some(v.persistent_volume_claim.as_ref()?.claim_name.clone()))
            .collect()
    };
    let binder = eventually("a consumer Pod of the restored claims", &op, || async {
        pods.get_opt("undo-bind").await.ok().flatten()
    })
    .await;
    let owner = &binder.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        Some(owner.uid.clone()),
        undo_.uid(),
        "the restore's own Pod"
    );
    let restored_names: Vec<String> = restored.iter().map(|(_, c)| c.clone()).collect();
    assert_eq!(mounted(&binder), restored_names);
    let image = (binder.spec.iter().flat_map(|s| &s.containers)).map(|c| c.image.clone());
    assert_eq!(image.collect::<Vec<_>>(), [Some(mirror.to_owned())]);
    // Then the disks made again (clones, of that class): bound the same way before the VM starts.
    eventually("a consumer Pod of the disks made again", &op, || async {
        let p = pods.get_opt("undo-bind").await.ok().flatten()?;
        (mounted(&p) == ["web-root", "web-data"]).then_some(())
    })
    .await;
    in_phase(&admin, &op, "undo", "Succeeded").await;
    for (disk, from) in &restored {
        let c = pvcs.get(name_of(disk)).await.expect("disk");
        assert_eq!(data_source(&c), Some(from.clone()), "{disk}");
        let phase = c.status.as_ref().and_then(|s| s.phase.as_deref());
        assert_eq!(phase, Some("Bound"), "{disk} bound before the VM starts");
    }
    assert!(
        pods.get_opt("undo-bind").await.expect("pod").is_none(),
        "the Pod is gone"
    );
    let vm = vms.get("web").await.expect("VM");
    assert_eq!(claims_of(&vm), ["web-root", "web-data"]);
    assert_eq!(vm.spec.run_strategy.as_deref(), Some("Always"));
    only_its_consumer_pod(&env, "undo-bind");
    snapshots::still_up(&mut op);
}
