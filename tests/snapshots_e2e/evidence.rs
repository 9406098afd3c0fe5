//! Issue 32, snapshots on evidence with `kubevirt-operator run` on a real control plane, attacks
//! by users with only the rights named: a forged scheduled snapshot moves neither
//! `SnapshotsReady` nor the schedule's entries in `status.snapshots`; a VM a user made under a
//! Machine's name, with its labels copied, is never snapshotted for the Machine.

use crate::access::{create_admitted, fixture, machines, rule, wait_status};
use crate::snapshots::{
    NS, dynamic, eventually, kubevirt_failed, kubevirt_took, object, running_web, scheduled,
};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::snapshots::MachineSnapshot;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::snapshot::VirtualMachineSnapshot;
use serde_json::json;

/// Issue 32: `SnapshotsReady` and `status.snapshots` on evidence. Mallory, who may only `get`
/// Machines and `create` MachineSnapshots, makes one labelled scheduled, annotated for the next
/// run, named like it, with a made-up proof; KubeVirt fails it. The condition still speaks of
/// the schedule's own last snapshot, unchanged since, and so does the real one's entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_scheduled_snapshot_moves_nothing() {
    let mut env = fixture(&[])
        .user("mallory", &[])
        .grant(
            NS,
            "mallory",
            vec![
                rule("vitistack.io", "machines", &["get"]),
                rule("vitistack.io", "machinesnapshots", &["create"]),
            ],
        )
        .start()
        .await;
    let (admin, mut op) = env.take_replica().await;
    let msnaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let (vm, machine_uid) = running_web(&admin, &op).await;
    Api::<Machine>::namespaced(admin.clone(), NS)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"snapshots": {"schedule": "0 2 * * *"}}})),
        )
        .await
        .expect("a schedule");
    // The schedule's own snapshot (the admin plays the scheduler), taken.
    let nightly = scheduled(&admin, "web-202611250200", "web", &machine_uid).await;
    dynamic::<MachineSnapshot>(&admin)
        .create(&PostParams::default(), &nightly)
        .await
        .expect("nightly");
    eventually("the nightly VirtualMachineSnapshot", &op, || async {
        vmsnaps.get_opt("web-202611250200").await.ok().flatten()
    })
    .await;
    kubevirt_took(&admin, "web-202611250200", &vm).await;
    let ready = |s: &kubevirt_operator::api::MachineStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "SnapshotsReady")
            .cloned()
    };
    let before = wait_status(
        &admin,
        NS,
        "web",
        &op,
        "SnapshotsReady on the nightly",
        |s| {
            ready(s).is_some_and(|c| {
                c.status == "True" && c.message.contains("web-202611250200 is Succeeded")
            })
        },
    )
    .await;
    let entry = |s: &kubevirt_operator::api::MachineStatus, name: &str| {
        (s.snapshots.iter()).find(|r| r.name == name).cloned()
    };
    let nightly_entry = entry(&before, "web-202611250200").expect("listed");

    // Mallory's forgery, which KubeVirt fails.
    let mut forged = object(
        "MachineSnapshot",
        "web-202611260200",
        json!({"machineName": "web"}),
    );
    forged.metadata.labels = Some(
        [
            (
                "vitistack.io/scheduled-snapshot".to_owned(),
                "true".to_owned(),
            ),
            ("vitistack.io/machine".to_owned(), "web".to_owned()),
        ]
        .into(),
    );
    forged.metadata.annotations = Some(
        [
            (
                "vitistack.io/scheduled-for".to_owned(),
                "2026-11-26T02:00:00Z".to_owned(),
            ),
            (
                kubevirt_operator::api::names::PROOF_ANNOTATION.to_owned(),
                format!("{machine_uid}.bm90IHRoZSBvcGVyYXRvcidzIHByb29m"),
            ),
        ]
        .into(),
    );
    dynamic::<MachineSnapshot>(&env.client_of("mallory").await)
        .create(&PostParams::default(), &forged)
        .await
        .expect("mallory may create snapshots");
    eventually("the forged VirtualMachineSnapshot", &op, || async {
        vmsnaps.get_opt("web-202611260200").await.ok().flatten()
    })
    .await;
    kubevirt_failed(&admin, "web-202611260200", "forged").await;
    eventually("the forgery failed", &op, || async {
        let s = msnaps.get("web-202611260200").await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(())
    })
    .await;
    // Seen by the reconciler (listed, failed), and nothing of the schedule moved.
    let after = wait_status(&admin, NS, "web", &op, "the forgery listed", |s| {
        entry(s, "web-202611260200").is_some_and(|r| !r.ready)
    })
    .await;
    let (was, is) = (ready(&before).expect("was"), ready(&after).expect("is"));
    assert_eq!(
        (is.status.as_str(), is.reason.as_str(), is.message.as_str()),
        (
            was.status.as_str(),
            was.reason.as_str(),
            was.message.as_str()
        ),
        "SnapshotsReady moved by a forgery"
    );
    assert_eq!(is.last_transition_time, was.last_transition_time);
    assert_eq!(entry(&after, "web-202611250200"), Some(nightly_entry));
    assert!(
        op.exited().is_none(),
        "the operator exited\n{}",
        op.log_tail(80)
    );
}

/// "Only a VM proven the Machine's": Mallory, who may create VirtualMachines, makes `db`'s VM
/// before the Machine, with the operator's labels; a MachineSnapshot of Machine `db` fails
/// saying so, and no VirtualMachineSnapshot of her VM is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_not_proven_the_machines_is_never_snapshotted() {
    let mut env = fixture(&[])
        .user("mallory", &[])
        .grant(
            NS,
            "mallory",
            vec![rule("kubevirt.io", "virtualmachines", &["create"])],
        )
        .start()
        .await;
    let (admin, op) = env.take_replica().await;
    let planted: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "db", "labels": {
            "vitistack.io/machine": "db", "vitistack.io/managed-by": "kubevirt-operator"}},
        "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}}
    }))
    .expect("VM");
    let as_mallory = env.client_of("mallory").await;
    Api::<DynamicObject>::namespaced_with(
        as_mallory,
        NS,
        &ApiResource::erase::<VirtualMachine>(&()),
    )
    .create(&PostParams::default(), &planted)
    .await
    .expect("mallory may create VMs");
    create_admitted(
        &machines(&admin, NS),
        &object("Machine", "db", json!({"template": "small"})),
        &op,
    )
    .await;
    dynamic::<MachineSnapshot>(&admin)
        .create(
            &PostParams::default(),
            &object("MachineSnapshot", "db-snap", json!({"machineName": "db"})),
        )
        .await
        .expect("db-snap");
    let msnaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let failed = eventually("db-snap refused", &op, || async {
        let s = msnaps.get("db-snap").await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(s)
    })
    .await;
    assert_eq!(
        failed.error.as_deref(),
        Some("VirtualMachine db is not the Machine's")
    );
    let vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(admin.clone(), NS);
    assert!(vmsnaps.get_opt("db-snap").await.expect("get").is_none());
}
