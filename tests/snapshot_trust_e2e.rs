//! Issue 32, scheduled snapshots a user can bet the data on, on a real API server (its
//! ResourceQuota admission included), driven by a clock the test moves. The attacks
//! are made by a user who may only `get machines` and `create machinesnapshots` in the
//! namespace: forged `scheduled` labels and far-future `scheduled-for` annotations, and snapshots
//! made by hand, delete nothing and stop nothing; a squatted `<machine>-<due>` name does not skip the run; `keep`
//! failures in a row leave the good backups; a re-created Machine prunes none of its
//! predecessor's snapshots; a scheduled snapshot made before the operator's proof is never
//! pruned. Bounded work (`bounds.rs`): a namespace at its MachineSnapshot quota delays no
//! other's; at most `--max-snapshots-in-flight` scheduled snapshots are taken at once, the
//! longest due first. The MachineSnapshot controller's status writes and the quota
//! controller's count are played by the admin.

mod scheduling;
mod support;

mod snapshot_trust_e2e {
    mod bounds;
}

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use kubevirt_operator::api::Machine;
use kubevirt_operator::api::snapshots::{
    MachineSnapshot, SCHEDULED_FOR_ANNOTATION, SCHEDULED_LABEL,
};
use kubevirt_operator::snapshots::context::Context;
use kubevirt_operator::snapshots::scheduler::{Report, Retries, tick_with};
use scheduling::{Hands, context, first_hour, machine, names, stamp};
use support::Fixture;
use support::rbac::rule;

const WAIT: Duration = Duration::from_secs(60);

/// One check of every schedule at `at`, from what the scheduler's watches would hold (every
/// MachineSnapshot and Machine, read from the API server).
async fn check(ctx: &Context, clock: &Hands, at: DateTime<Utc>, retries: &mut Retries) -> Report {
    clock.set(at);
    let m = Api::<Machine>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .expect("machines")
        .items;
    let s = Api::<MachineSnapshot>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .expect("snapshots")
        .items;
    let m: Vec<&Machine> = m.iter().collect();
    let s: Vec<&MachineSnapshot> = s.iter().collect();
    tick_with(ctx, &m, &s, retries).await
}

/// Plays the MachineSnapshot controller: `name` reached `phase`.
async fn finished(snaps: &Api<MachineSnapshot>, name: &str, phase: &str) {
    snaps
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase, "readyToUse": phase == "Succeeded"}})),
        )
        .await
        .expect("status");
}

/// The one snapshot of `machine_name` made since `before` (names listed then).
async fn made_since(snaps: &Api<MachineSnapshot>, before: &[String]) -> String {
    let now = names(snaps).await;
    let new: Vec<&String> = now.iter().filter(|n| !before.contains(n)).collect();
    assert_eq!(new.len(), 1, "one new snapshot: {new:?} (all: {now:?})");
    new[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_squatted_failed_and_predecessors_snapshots_leave_the_backups() {
    // Mallory may read Machines and create MachineSnapshots here, nothing else.
    let ns = "trust";
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
        .start()
        .await;
    let admin = cp.admin_client().await;
    let snaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), ns);
    let as_mallory: Api<MachineSnapshot> = Api::namespaced(cp.client_of("mallory").await, ns);

    let db = machine(
        &admin,
        ns,
        "db",
        json!({"template": "small", "snapshots": {"schedule": "0 * * * *", "keep": 2}}),
    )
    .await;
    let first = first_hour(&db);
    let hour = |n: i64| first + chrono::Duration::hours(n);
    let clock = Arc::new(Hands(Mutex::new(first)));
    let ctx = context(&admin, clock.clone());
    let mut retries = Retries::default();

    // Two good backups.
    for n in 0..2 {
        check(&ctx, &clock, hour(n), &mut retries).await;
        finished(&snaps, &stamp("db", hour(n)), "Succeeded").await;
    }
    let good = vec![stamp("db", hour(0)), stamp("db", hour(1))];
    assert_eq!(names(&snaps).await, good);
    // A scheduled snapshot from before the made-for proof, as the operator then made it (name,
    // label, annotation, no proof), taken: the oldest good one, yet never the schedule's to prune.
    let legacy = stamp("db", hour(-1));
    snaps
        .create(
            &PostParams::default(),
            &forged_by_label(&legacy, &hour(-1).to_rfc3339()),
        )
        .await
        .expect("a snapshot from before the proof");
    finished(&snaps, &legacy, "Succeeded").await;

    // Mallory's forgeries: labelled scheduled, due in 2099, and the next run's name squatted.
    let forged = forged_by_label;
    let mut planted = vec![stamp("db", hour(2))];
    for y in 0..3 {
        planted.push(format!("db-2099010{}0000", y + 1));
    }
    for (i, name) in planted.iter().enumerate() {
        let due = if i == 0 {
            hour(2).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        } else {
            format!("2099-01-0{i}T00:00:00Z")
        };
        as_mallory
            .create(&PostParams::default(), &forged(name, &due))
            .await
            .expect("mallory may create snapshots");
    }
    // And one made by hand, unlabelled, as a user takes one before an upgrade.
    as_mallory
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
                "metadata": {"name": "db-by-hand"}, "spec": {"machineName": "db"}
            }))
            .expect("snapshot"),
        )
        .await
        .expect("mallory may create snapshots");
    planted.push("db-by-hand".to_owned());
    // The run of hour 2 happens under the next free name; nothing real nor planted is deleted.
    let before = names(&snaps).await;
    check(&ctx, &clock, hour(2), &mut retries).await;
    let run2 = made_since(&snaps, &before).await;
    assert!(run2.starts_with(&stamp("db", hour(2))), "{run2}");
    let all = names(&snaps).await;
    for n in good.iter().chain(&planted).chain([&legacy]) {
        assert!(all.contains(n), "{n} deleted: {all:?}");
    }
    // Mallory's 2099 ones stop nothing: hour 3 is taken too.
    finished(&snaps, &run2, "Failed").await;
    let before = names(&snaps).await;
    check(&ctx, &clock, hour(3), &mut retries).await;
    let run3 = made_since(&snaps, &before).await;
    assert_eq!(run3, stamp("db", hour(3)));
    finished(&snaps, &run3, "Failed").await;

    // `keep` (2) failures in a row: both good backups are still there.
    let all = names(&snaps).await;
    for n in &good {
        assert!(all.contains(n), "{n} rotated out by failures: {all:?}");
    }
    // Two newer good ones: the older good ones beyond keep and the failed ones go, not Mallory's.
    for n in 4..6 {
        check(&ctx, &clock, hour(n), &mut retries).await;
        finished(&snaps, &stamp("db", hour(n)), "Succeeded").await;
    }
    check(
        &ctx,
        &clock,
        hour(6) - chrono::Duration::minutes(1),
        &mut retries,
    )
    .await;
    let mut expected: Vec<String> = planted.clone();
    expected.extend([legacy.clone(), stamp("db", hour(4)), stamp("db", hour(5))]);
    expected.sort();
    assert_eq!(names(&snaps).await, expected);

    // db deleted by mistake and made again: its predecessor's backups are never pruned.
    Api::<Machine>::namespaced(admin.clone(), ns)
        .delete("db", &DeleteParams::default())
        .await
        .expect("delete db");
    support::eventually_with(WAIT, "db gone", String::new, || async {
        let gone = Api::<Machine>::namespaced(admin.clone(), ns)
            .get_opt("db")
            .await
            .ok()?
            .is_none();
        gone.then_some(())
    })
    .await;
    let again = machine(
        &admin,
        ns,
        "db",
        json!({"template": "small", "snapshots": {"schedule": "0 * * * *", "keep": 1}}),
    )
    .await;
    let from = first_hour(&again).max(hour(7));
    for n in 0..3 {
        let at = from + chrono::Duration::hours(n);
        let before = names(&snaps).await;
        check(&ctx, &clock, at, &mut retries).await;
        let made = made_since(&snaps, &before).await;
        finished(&snaps, &made, "Succeeded").await;
    }
    check(
        &ctx,
        &clock,
        from + chrono::Duration::hours(3) - chrono::Duration::minutes(1),
        &mut retries,
    )
    .await;
    let all = names(&snaps).await;
    for n in [stamp("db", hour(4)), stamp("db", hour(5)), legacy.clone()] {
        assert!(all.contains(&n), "the predecessor's {n} pruned: {all:?}");
    }
    // The one from before the proof is deleted by hand, like any snapshot.
    snaps
        .delete(&legacy, &DeleteParams::default())
        .await
        .expect("deleted by hand");
    support::eventually_with(WAIT, "the old snapshot gone", String::new, || async {
        snaps.get_opt(&legacy).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// A MachineSnapshot of `db` labelled and annotated as a scheduled one due at `due`, without
/// the operator's proof: what a user can write, and what the operator wrote before the proof.
fn forged_by_label(name: &str, due: &str) -> MachineSnapshot {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": name,
            "labels": {SCHEDULED_LABEL: "true", "vitistack.io/machine": "db"},
            "annotations": {SCHEDULED_FOR_ANNOTATION: due}},
        "spec": {"machineName": "db"}
    }))
    .expect("snapshot")
}
