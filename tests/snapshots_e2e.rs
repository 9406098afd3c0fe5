//! Issue 21, snapshots and restores end to end on a real control plane with
//! `kubevirt-operator run` (webhooks registered, reconciler and snapshot controllers leading),
//! playing KubeVirt's VM, snapshot and restore controllers by writing their real objects and
//! status through the API server (KubeVirt's CRDs check them): a MachineSnapshot makes a
//! VirtualMachineSnapshot of the Machine's VM and mirrors its status; the webhooks refuse
//! snapshots and restores naming what does not exist, another Machine's snapshot, and authors
//! without `get` (snapshot) or `update` (restore) on the Machine; a failed restore leaves the old
//! disks mounted; a restore stops the VM, is never reverted mid-way, ends with the VM on claims
//! `<machine>-<disk>` (new uids, controlled by the Machine, cloned from the restored claims) and
//! running again; deleting the Machine keeps its snapshots, deleting a snapshot its KubeVirt one.

mod access;
mod kubevirt;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use access::{WAIT, create_admitted, first_denial, grant, machines, rule, setup, wait_status};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::snapshots::{MachineRestore, MachineSnapshot};
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::snapshot::{
    VirtualMachineRestore, VirtualMachineSnapshot,
};

const NS: &str = "team-a";

fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec
    }))
    .expect(kind)
}

fn dynamic<K: kube::Resource<DynamicType = ()>>(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &kube::api::ApiResource::erase::<K>(&()))
}

async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    op: &support::Proc,
    f: impl FnMut() -> F,
) -> T {
    support::eventually_with(WAIT, what, || op.log_tail(60), f).await
}

fn claims_of(vm: &VirtualMachine) -> Vec<String> {
    vm.spec
        .template
        .spec
        .volumes
        .iter()
        .filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|p| p.claim_name.clone())
        })
        .collect()
}

fn uid(c: &PersistentVolumeClaim) -> String {
    c.uid().unwrap_or_default()
}

fn restore_phase(r: &MachineRestore) -> Option<&str> {
    r.status.as_ref()?.phase.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_and_restores_of_a_machine() {
    let (mut cp, admin, mut op) = setup(&[]).await;
    cp.start_controller_manager()
        .await
        .expect("controller manager");
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(admin.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let msnaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let mrestores: Api<MachineRestore> = Api::namespaced(admin.clone(), NS);
    let vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let vmrestores: Api<VirtualMachineRestore> = Api::namespaced(admin.clone(), NS);
    let machine_api: Api<Machine> = Api::namespaced(admin.clone(), NS);

    // A running Machine with two blank disks.
    let web = object(
        "Machine",
        "web",
        json!({"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}),
    );
    create_admitted(&machines(&admin, NS), &web, &op).await;
    create_admitted(
        &machines(&admin, NS),
        &object("Machine", "db", json!({"template": "small"})),
        &op,
    )
    .await;
    let vm = eventually("web's VM on its disks", &op, || async {
        let vm = vms.get_opt("web").await.ok().flatten()?;
        (claims_of(&vm) == ["web-root", "web-data"]).then_some(vm)
    })
    .await;
    assert_eq!(vm.spec.run_strategy.as_deref(), Some("Always"));
    kubevirt::vmi(&admin, NS, "web", json!({"phase": "Running"})).await;
    let machine_uid = machine_api
        .get("web")
        .await
        .expect("web")
        .uid()
        .expect("uid");

    // Snapshots refused: a Machine that does not exist, an author who may not read the Machine.
    let msnap_api = dynamic::<MachineSnapshot>(&admin);
    let ghost = object(
        "MachineSnapshot",
        "ghost-1",
        json!({"machineName": "ghost"}),
    );
    let message = first_denial(&msnap_api, &PostParams::default(), &ghost, &op).await;
    assert!(message.contains("Machine ghost not found"), "{message}");
    let alice = cp.mint_user("alice", &[]).expect("alice");
    grant(
        &admin,
        NS,
        "alice",
        vec![rule("vitistack.io", "machinesnapshots", &["create"])],
    )
    .await;
    let as_alice = cp.client_for(&alice).await.expect("alice client");
    let peek = object("MachineSnapshot", "peek", json!({"machineName": "web"}));
    let message = access::denial(
        dynamic::<MachineSnapshot>(&as_alice)
            .create(&PostParams::default(), &peek)
            .await,
    );
    assert!(
        message.contains(r#"user "alice" cannot get machines.vitistack.io in namespace "team-a""#),
        "{message}"
    );

    // A snapshot: one VirtualMachineSnapshot of web's VM, controlled by the MachineSnapshot.
    let before = object(
        "MachineSnapshot",
        "web-before",
        json!({"machineName": "web"}),
    );
    let before = msnap_api
        .create(&PostParams::default(), &before)
        .await
        .expect("web-before");
    let vmsnap = eventually("the VirtualMachineSnapshot", &op, || async {
        vmsnaps.get_opt("web-before").await.ok().flatten()
    })
    .await;
    assert_eq!(vmsnap.spec.source.name, "web");
    assert_eq!(vmsnap.spec.source.kind, "VirtualMachine");
    let owner = &vmsnap.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        (before.uid().expect("uid").as_str(), Some(true))
    );
    let pending = eventually("web-before Pending or InProgress", &op, || async {
        msnaps.get("web-before").await.ok()?.status
    })
    .await;
    assert_eq!(pending.ready_to_use, Some(false));
    assert_eq!(pending.machine_uid.as_deref(), Some(machine_uid.as_str()));
    // KubeVirt's snapshot controller reports it taken.
    vmsnaps
        .patch_status(
            "web-before",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "phase": "Succeeded", "readyToUse": true,
                "creationTime": "2026-11-25T02:00:03Z",
                "sourceUID": vm.uid(),
                "virtualMachineSnapshotContentName": "vmsnapshot-content-web-before",
                "snapshotVolumes": {"includedVolumes": ["root", "data"]}}})),
        )
        .await
        .expect("VirtualMachineSnapshot status");
    let mirrored = eventually("web-before mirrored", &op, || async {
        let s = msnaps.get("web-before").await.ok()?.status?;
        (s.phase.as_deref() == Some("Succeeded")).then_some(s)
    })
    .await;
    assert_eq!(mirrored.ready_to_use, Some(true));
    assert_eq!(mirrored.disks, ["root", "data"]);
    assert_eq!(
        mirrored.creation_time.map(|t| t.0.to_string()).as_deref(),
        Some("2026-11-25T02:00:03Z")
    );
    // Another Machine's snapshot, to be refused for web.
    msnap_api
        .create(
            &PostParams::default(),
            &object("MachineSnapshot", "db-snap", json!({"machineName": "db"})),
        )
        .await
        .expect("db-snap");

    // Restores refused: an author without update on the Machine, a snapshot that does not
    // exist, another Machine's snapshot.
    let bob = cp.mint_user("bob", &[]).expect("bob");
    grant(
        &admin,
        NS,
        "bob",
        vec![
            rule("vitistack.io", "machinerestores", &["create"]),
            rule("vitistack.io", "machines", &["get"]),
        ],
    )
    .await;
    let as_bob = cp.client_for(&bob).await.expect("bob client");
    let mrestore_api = dynamic::<MachineRestore>(&admin);
    let undo = |name: &str, snap: &str| {
        object(
            "MachineRestore",
            name,
            json!({"machineName": "web", "snapshotName": snap}),
        )
    };
    let message = access::denial(
        dynamic::<MachineRestore>(&as_bob)
            .create(&PostParams::default(), &undo("bobs", "web-before"))
            .await,
    );
    assert!(
        message.contains(r#"user "bob" cannot update machines.vitistack.io in namespace "team-a""#),
        "{message}"
    );
    for (snap, expected) in [
        ("nope", "MachineSnapshot nope not found"),
        (
            "db-snap",
            "MachineSnapshot db-snap is a snapshot of Machine db, not of web",
        ),
    ] {
        let refused = mrestore_api
            .create(&PostParams::default(), &undo("bad", snap))
            .await;
        let message = match refused {
            Err(kube::Error::Api(e)) => e.message,
            other => panic!("{snap}: expected a refusal, got {other:?}"),
        };
        assert!(message.contains(expected), "{message}");
    }

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

    // Deleting the Machine keeps its snapshots; deleting a snapshot deletes KubeVirt's.
    machine_api
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete web");
    eventually("web gone", &op, || async {
        machine_api
            .get_opt("web")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(msnaps.get_opt("web-before").await.expect("get").is_some());
    assert!(vmsnaps.get_opt("web-before").await.expect("get").is_some());
    msnaps
        .delete("web-before", &DeleteParams::default())
        .await
        .expect("delete web-before");
    eventually("the VirtualMachineSnapshot collected", &op, || async {
        vmsnaps
            .get_opt("web-before")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        op.exited().is_none(),
        "the operator exited\n{}",
        op.log_tail(80)
    );
}
