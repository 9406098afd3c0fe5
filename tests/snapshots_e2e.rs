//! Issue 21, snapshots end to end on a real control plane with `kubevirt-operator run` (webhooks
//! registered, reconciler and snapshot controllers leading) and kube-controller-manager's garbage
//! collector, playing KubeVirt's VM and snapshot controllers through the API server (KubeVirt's
//! CRDs check what is written): a MachineSnapshot makes a VirtualMachineSnapshot of the Machine's
//! VM and mirrors its status; the webhooks refuse snapshots and restores naming what does not
//! exist, another Machine's snapshot, and authors without `get` (snapshot) or `update` (restore)
//! on the Machine; deleting the Machine keeps its snapshots, deleting a snapshot its KubeVirt one.
//! Issue 32 (in `snapshots_e2e/evidence.rs`): a forged scheduled snapshot moves nothing, a VM
//! not proven the Machine's is never snapshotted. Restores themselves: `tests/restores_e2e.rs`.

mod access;
mod kubevirt;
mod snapshots;
mod support;

/// Issue 32's tests of snapshots on evidence, in tests/snapshots_e2e/ (still one test binary).
mod snapshots_e2e {
    mod evidence;
}

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use access::{create_admitted, first_denial, fixture, machines, rule, wait_status};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::snapshots::{MachineRestore, MachineSnapshot};
use kubevirt_operator::reconciler::apis::snapshot::VirtualMachineSnapshot;
use snapshots::{
    NS, dynamic, eventually, kubevirt_failed, kubevirt_took, object, running_web, scheduled,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_of_a_machine_and_who_may_take_and_restore_them() {
    let mut env = fixture(&[])
        .with_controller_manager()
        .user("alice", &[])
        .grant(
            NS,
            "alice",
            vec![rule("vitistack.io", "machinesnapshots", &["create"])],
        )
        .user("bob", &[])
        .grant(
            NS,
            "bob",
            vec![
                rule("vitistack.io", "machinerestores", &["create"]),
                rule("vitistack.io", "machines", &["get"]),
            ],
        )
        .start()
        .await;
    let (admin, mut op) = env.take_replica().await;
    let msnaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let machine_api: Api<Machine> = Api::namespaced(admin.clone(), NS);

    // A running Machine with two blank disks, and another Machine.
    let (vm, machine_uid) = running_web(&admin, &op).await;
    create_admitted(
        &machines(&admin, NS),
        &object("Machine", "db", json!({"template": "small"})),
        &op,
    )
    .await;

    // Snapshots refused: a Machine that does not exist, an author who may not read the Machine.
    let msnap_api = dynamic::<MachineSnapshot>(&admin);
    let ghost = object(
        "MachineSnapshot",
        "ghost-1",
        json!({"machineName": "ghost"}),
    );
    let message = first_denial(&msnap_api, &PostParams::default(), &ghost, &op).await;
    assert!(message.contains("Machine ghost not found"), "{message}");
    let as_alice = env.client_of("alice").await;
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
    kubevirt_took(&admin, "web-before", &vm).await;
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
    // The Machine lists it; with a schedule, SnapshotsReady says whether the last scheduled
    // snapshot failed.
    wait_status(
        &admin,
        NS,
        "web",
        &op,
        "web-before in status.snapshots",
        |s| {
            s.snapshots
                .iter()
                .any(|r| r.name == "web-before" && r.ready)
        },
    )
    .await;
    let condition = |s: &kubevirt_operator::api::MachineStatus| {
        let c = s.conditions.iter().find(|c| c.type_ == "SnapshotsReady")?;
        Some((c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    assert_eq!(
        condition(
            &machine_api
                .get("web")
                .await
                .expect("web")
                .status
                .expect("status")
        ),
        None,
        "no schedule, no SnapshotsReady"
    );
    machine_api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"snapshots": {"schedule": "0 2 * * *", "keep": 3}}})),
        )
        .await
        .expect("a schedule");
    wait_status(&admin, NS, "web", &op, "SnapshotsReady True", |s| {
        condition(s)
            .is_some_and(|(status, reason, _)| status == "True" && reason == "SnapshotsScheduled")
    })
    .await;
    // The schedule's snapshot (the admin plays the scheduler, with the operator's proof).
    let nightly = scheduled(&admin, "web-202611250200", "web", &machine_uid).await;
    msnap_api
        .create(&PostParams::default(), &nightly)
        .await
        .expect("nightly");
    eventually("the nightly VirtualMachineSnapshot", &op, || async {
        vmsnaps.get_opt("web-202611250200").await.ok().flatten()
    })
    .await;
    let why = "no VolumeSnapshotClass for StorageClass standard";
    kubevirt_failed(&admin, "web-202611250200", why).await;
    let failed = wait_status(&admin, NS, "web", &op, "SnapshotsReady False", |s| {
        condition(s).is_some_and(|(status, _, _)| status == "False")
    })
    .await;
    let (_, reason, message) = condition(&failed).expect("condition");
    assert_eq!(reason, "SnapshotFailed");
    assert!(
        message
            .contains("web-202611250200 failed: no VolumeSnapshotClass for StorageClass standard"),
        "{message}"
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
    let as_bob = env.client_of("bob").await;
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
