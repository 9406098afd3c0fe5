//! Issue 32, bounded work: a MachineSnapshot of a Machine without a VM on its cluster (one made
//! before its VM, or whose VM never comes; a remote Machine's is taken on its own cluster since
//! issue 31, see tests/remote_snapshots_e2e.rs), created by a user who may only `get machines`
//! and `create machinesnapshots`, is looked at again with exponential backoff (not every few
//! seconds forever), then fails with reason `NoVM` after the pending limit. The MachineSnapshot
//! controller runs for real on a real API server, judging age by a clock the test moves; its
//! requests are counted from the API server's audit log.

mod scheduling;
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use kubevirt_operator::api::snapshots::MachineSnapshot;
use kubevirt_operator::reconciler::run::watches::Scope;
use scheduling::{Hands, context, machine};
use support::rbac::rule;
use support::{ControlPlane, Fixture};

const WAIT: Duration = Duration::from_secs(60);

/// The MachineSnapshot controller's GETs of Machine `name` the API server received after
/// `since` (its own user).
fn machine_gets(cp: &ControlPlane, name: &str, since: DateTime<Utc>) -> usize {
    cp.audited_requests()
        .expect("audit log")
        .iter()
        .filter(|r| {
            r.user == "snapshots"
                && r.verb == "get"
                && r.resource == "machines"
                && r.name == name
                && r.received.is_some_and(|t| t > since)
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_a_machine_without_a_vm_backs_off_then_fails() {
    let ns = "novm";
    let cp = Fixture::new()
        .with_all_crds()
        .namespace(ns)
        .user("mallory", &[])
        .grant(
            ns,
            "mallory",
            vec![
                rule("vitistack.io", "machines", &["get"]),
                rule("vitistack.io", "machinesnapshots", &["create"]),
            ],
        )
        // The MachineSnapshot controller's own user, so that its requests can be told apart.
        .user("snapshots", &["system:masters"])
        .start()
        .await;
    let admin = cp.admin_client().await;
    // A local Machine whose VM never comes (no reconciler runs here: none is made).
    machine(&admin, ns, "far", json!({"template": "small"})).await;
    let clock = Arc::new(Hands(Mutex::new(Utc::now())));
    let mut ctx = context(&cp.client_of("snapshots").await, clock.clone());
    ctx.settings.limits.pending_limit = Duration::from_secs(30 * 60);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(async move {
        kubevirt_operator::snapshots::snapshot::run(Arc::new(ctx), &Scope::All, async {
            let _ = stopped.await;
        })
        .await;
    });

    let snap: MachineSnapshot = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": "far-1"}, "spec": {"machineName": "far"}
    }))
    .expect("snapshot");
    let made = Api::<MachineSnapshot>::namespaced(cp.client_of("mallory").await, ns)
        .create(&PostParams::default(), &snap)
        .await
        .expect("mallory may create snapshots");
    let created = made
        .metadata
        .creation_timestamp
        .expect("created")
        .0
        .as_second();
    let created = DateTime::<Utc>::from_timestamp(created, 0).expect("time");
    let snaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), ns);
    let phase = |s: MachineSnapshot| s.status.and_then(|st| st.phase);
    support::eventually_with(WAIT, "far-1 Pending", String::new, || async {
        (phase(snaps.get("far-1").await.ok()?).as_deref() == Some("Pending")).then_some(())
    })
    .await;

    // Ten minutes old: every look from now on waits five minutes after it. A look already under
    // way may have judged the age by the old clock (and come back in 10 s) or by the new one (and
    // come back in 5 minutes): the poke makes a look that surely starts after the move.
    clock.set(created + chrono::Duration::minutes(10));
    let moved = Utc::now();
    poke(&snaps, "1").await;
    support::eventually_with(
        WAIT,
        "a look after the clock moved",
        String::new,
        || async { (machine_gets(&cp, "far", moved) > 0).then_some(()) },
    )
    .await;
    let after = Utc::now();
    // Before the backoff: a look every 10 s, so at least two within 25 s. Now at most one more
    // (the poke's, if a timed look came first), then none for 5 minutes. A window, not a wait
    // for a state: without the backoff the looks are on a timer, no slower on a busy machine.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let more = machine_gets(&cp, "far", after);
    assert!(more <= 1, "looked {more} times within 25 s");

    // Past the limit: the next look fails it, naming why.
    clock.set(created + chrono::Duration::minutes(31));
    poke(&snaps, "2").await;
    let status = support::eventually_with(WAIT, "far-1 Failed", String::new, || async {
        let st = snaps.get("far-1").await.ok()?.status?;
        (st.phase.as_deref() == Some("Failed")).then_some(st)
    })
    .await;
    assert_eq!(status.reason.as_deref(), Some("NoVM"), "{status:?}");
    assert!(
        status
            .error
            .as_deref()
            .is_some_and(|e| e.contains("Machine far had no VM")),
        "{status:?}"
    );
    let _ = stop.send(());
    controller.await.expect("controller");
}

/// Wakes the controller with a change to the MachineSnapshot's annotations.
async fn poke(snaps: &Api<MachineSnapshot>, n: &str) {
    snaps
        .patch(
            "far-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"poke": n}}})),
        )
        .await
        .expect("poke");
}
