//! Bounded scheduled work on a real API server (its ResourceQuota admission included): a
//! namespace at its MachineSnapshot quota delays no other namespace's snapshot (a failed create
//! holds no slot); at most `--max-snapshots-in-flight` scheduled snapshots are taken at once,
//! the longest due first.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::scheduling::{Hands, context, first_hour, machine, names, stamp};
use crate::support::Fixture;
use crate::{check, finished};
use kubevirt_operator::api::snapshots::MachineSnapshot;
use kubevirt_operator::snapshots::scheduler::Retries;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_at_its_snapshot_quota_delays_no_other_namespace() {
    let (full, free) = ("aquota", "zfree");
    let cp = Fixture::new()
        .with_all_crds()
        .namespace(full)
        .namespace(free)
        .start()
        .await;
    let admin = cp.admin_client().await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "no-snapshots"},
        "spec": {"hard": {"count/machinesnapshots.vitistack.io": "0"}}
    }))
    .expect("quota");
    let quotas: Api<ResourceQuota> = Api::namespaced(admin.clone(), full);
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("quota");
    // Played: kube-controller-manager's quota controller counts it (none used); the API
    // server's ResourceQuota admission enforces it.
    quotas
        .patch_status(
            "no-snapshots",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "hard": {"count/machinesnapshots.vitistack.io": "0"},
                "used": {"count/machinesnapshots.vitistack.io": "0"}}})),
        )
        .await
        .expect("quota status");

    let schedule = json!({"template": "small", "snapshots": {"schedule": "0 * * * *"}});
    let mut newest = None;
    for i in 0..6 {
        newest = Some(machine(&admin, full, &format!("m{i}"), schedule.clone()).await);
    }
    let other = machine(&admin, free, "other", schedule.clone()).await;
    let created = [newest.expect("machines"), other];
    let at = created.iter().map(first_hour).max().expect("hour");
    let clock = Arc::new(Hands(Mutex::new(at)));
    let mut ctx = context(&admin, clock.clone());
    // Fewer slots than failing Machines, which sort first (same due time, `aquota` before
    // `zfree`): a create that failed holds no slot, so the free namespace's turn comes now.
    ctx.settings.limits.max_in_flight = 2;
    // Checked as often as a leader would within the minute: the free namespace's snapshot is
    // made at the first check; each Machine of the full namespace fails alone, says why, and
    // waits its retry.
    let mut retries = Retries::default();
    let report = check(&ctx, &clock, at, &mut retries).await;
    assert_eq!(report.failed.len(), 6, "{report:?}");
    assert_eq!(
        report.made,
        [format!("{free}/{}", stamp("other", at))],
        "the free namespace's snapshot at once: {report:?}"
    );
    assert!(report.deferred.is_empty(), "{report:?}");
    assert!(
        report
            .failed
            .iter()
            .all(|(m, e)| m.starts_with(full) && e.contains("exceeded quota")),
        "{report:?}"
    );
    let report = check(
        &ctx,
        &clock,
        at + chrono::Duration::seconds(20),
        &mut retries,
    )
    .await;
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!(report.waiting.len(), 6, "{report:?}");
    let report = check(
        &ctx,
        &clock,
        at + chrono::Duration::seconds(31),
        &mut retries,
    )
    .await;
    assert_eq!(report.failed.len(), 6, "retried after 30 s: {report:?}");
    let free_snaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), free);
    assert_eq!(names(&free_snaps).await, [stamp("other", at)]);
    let full_snaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), full);
    assert!(names(&full_snaps).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_max_in_flight_scheduled_snapshots_are_taken_at_once() {
    let ns = "flight";
    let cp = Fixture::new().with_all_crds().namespace(ns).start().await;
    let admin = cp.admin_client().await;
    let snaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), ns);
    let schedule = json!({"template": "small", "snapshots": {"schedule": "0 * * * *"}});
    let mut made = Vec::new();
    for name in ["a", "b", "c"] {
        made.push(machine(&admin, ns, name, schedule.clone()).await);
    }
    let at = made.iter().map(first_hour).max().expect("hour");
    let clock = Arc::new(Hands(Mutex::new(at)));
    let mut ctx = context(&admin, clock.clone());
    ctx.settings.limits.max_in_flight = 2;
    let mut retries = Retries::default();
    // Three due, two slots: two taken, the third waits (not failed, not skipped).
    let report = check(&ctx, &clock, at, &mut retries).await;
    assert_eq!(report.made.len(), 2, "{report:?}");
    assert_eq!(report.deferred.len(), 1, "{report:?}");
    assert!(report.failed.is_empty(), "{report:?}");
    let report = check(
        &ctx,
        &clock,
        at + chrono::Duration::seconds(30),
        &mut retries,
    )
    .await;
    assert!(report.made.is_empty(), "both still in flight: {report:?}");
    assert_eq!(report.deferred.len(), 1, "{report:?}");
    // One finishes: the third is taken, for the same due time.
    let first = names(&snaps).await[0].clone();
    finished(&snaps, &first, "Succeeded").await;
    let report = check(
        &ctx,
        &clock,
        at + chrono::Duration::seconds(60),
        &mut retries,
    )
    .await;
    assert_eq!(report.made.len(), 1, "{report:?}");
    let all = names(&snaps).await;
    assert_eq!(all.len(), 3, "{all:?}");
    for m in ["a", "b", "c"] {
        assert!(all.contains(&stamp(m, at)), "{m}: {all:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_due_is_taken_first() {
    let ns = "turns";
    let cp = Fixture::new().with_all_crds().namespace(ns).start().await;
    let admin = cp.admin_client().await;
    let snaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), ns);
    // `z` (made last, named last) is due on the hour, `a` and `b` half an hour later.
    let half_past = json!({"template": "small", "snapshots": {"schedule": "30 * * * *"}});
    machine(&admin, ns, "a", half_past.clone()).await;
    machine(&admin, ns, "b", half_past).await;
    let z = machine(
        &admin,
        ns,
        "z",
        json!({"template": "small", "snapshots": {"schedule": "0 * * * *"}}),
    )
    .await;
    let on_the_hour = first_hour(&z);
    let at = on_the_hour + chrono::Duration::minutes(30);
    let clock = Arc::new(Hands(Mutex::new(at)));
    let mut ctx = context(&admin, clock.clone());
    ctx.settings.limits.max_in_flight = 1;
    let mut retries = Retries::default();
    let report = check(&ctx, &clock, at, &mut retries).await;
    assert_eq!(
        report.made,
        [format!("{ns}/{}", stamp("z", on_the_hour))],
        "{report:?}"
    );
    assert_eq!(report.deferred, [format!("{ns}/a"), format!("{ns}/b")]);
    // Then `a` (its name before `b`'s at the same due time), once `z`'s is taken.
    finished(&snaps, &stamp("z", on_the_hour), "Succeeded").await;
    let report = check(
        &ctx,
        &clock,
        at + chrono::Duration::seconds(30),
        &mut retries,
    )
    .await;
    assert_eq!(
        report.made,
        [format!("{ns}/{}", stamp("a", at))],
        "{report:?}"
    );
}
