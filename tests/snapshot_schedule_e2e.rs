//! Issue 21, scheduled snapshots on a real API server, driven by a clock the test moves: the
//! schedule makes a MachineSnapshot at each due time (labelled scheduled, named
//! `<machine>-<yyyymmddhhmm>`), one catch-up after downtime rather than a burst, and keeps exactly
//! `keep` taken scheduled ones, oldest deleted first; snapshots made by hand and other Machines' are
//! never counted nor deleted.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use kubevirt_operator::api::Machine;
use kubevirt_operator::api::snapshots::{MachineSnapshot, SCHEDULED_LABEL};
use kubevirt_operator::reconciler::decide::evidence::OwnershipKey;
use kubevirt_operator::reconciler::run::watches::Scope;
use kubevirt_operator::snapshots::Clock;
use kubevirt_operator::snapshots::context::{Context, Settings};
use kubevirt_operator::snapshots::scheduler::tick;
use support::Fixture;

/// A clock that moves only when told.
struct Hands(Mutex<DateTime<Utc>>);

impl Clock for Hands {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().expect("clock")
    }
}

impl Hands {
    fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().expect("clock") = t;
    }
}

async fn machine(client: &Client, ns: &str, name: &str, spec: serde_json::Value) -> Machine {
    let m: Machine = serde_json::from_value(serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("machine");
    Api::<Machine>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &m)
        .await
        .expect("create machine")
}

async fn names(snaps: &Api<MachineSnapshot>) -> Vec<String> {
    let mut n: Vec<String> = snaps
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|s| s.name_any())
        .collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_takes_snapshots_when_due_and_keeps_keep() {
    let cp = Fixture::new().with_all_crds().start().await;
    let client = cp.admin_client().await;
    let ns = cp.namespace("sched").await.expect("namespace");
    let snaps: Api<MachineSnapshot> = Api::namespaced(client.clone(), &ns);

    let hourly = machine(
        &client,
        &ns,
        "cron",
        serde_json::json!({"template": "small", "snapshots": {"schedule": "0 * * * *", "keep": 2}}),
    )
    .await;
    machine(
        &client,
        &ns,
        "plain",
        serde_json::json!({"template": "small"}),
    )
    .await;
    // Made by hand, of the same Machine: never counted against keep nor deleted.
    let by_hand: MachineSnapshot = serde_json::from_value(serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": "cron-by-hand"}, "spec": {"machineName": "cron"}
    }))
    .expect("snapshot");
    snaps
        .create(&PostParams::default(), &by_hand)
        .await
        .expect("by hand");

    // The first full hour after the Machine was made.
    let created = hourly.metadata.creation_timestamp.expect("created").0;
    let created = DateTime::<Utc>::from_timestamp(created.as_second(), 0).expect("time");
    let first = (created + chrono::Duration::hours(1))
        .with_minute(0)
        .and_then(|t| t.with_second(0))
        .expect("hour");
    let clock = Arc::new(Hands(Mutex::new(first - chrono::Duration::minutes(1))));
    let ctx = Context {
        client: client.clone(),
        settings: Settings {
            scopes: vec![Scope::All],
            namespace: "unused".into(),
            clock: clock.clone(),
            tick: Duration::from_secs(1),
            limits: Default::default(),
            pause_image: kubevirt_operator::snapshots::context::DEFAULT_PAUSE_IMAGE.to_owned(),
        },
        key: OwnershipKey::new(&[7; 32], None).expect("key"),
        kubevirt: true,
    };
    let stamp = |t: DateTime<Utc>| format!("cron-{}", t.format("%Y%m%d%H%M"));
    // What the scheduler's watches hold, read from the API server at each check.
    let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
    let scheduled = ListParams::default().labels(&format!("{SCHEDULED_LABEL}=true"));
    let check = |at: DateTime<Utc>| {
        clock.set(at);
        let (machines, snaps, scheduled, ctx) = (&machines, &snaps, &scheduled, &ctx);
        async move {
            let m = machines.list(&ListParams::default()).await?.items;
            let s = snaps.list(scheduled).await?.items;
            let m: Vec<&Machine> = m.iter().collect();
            let s: Vec<&MachineSnapshot> = s.iter().collect();
            let report = tick(ctx, &m, &s).await;
            assert!(report.failed.is_empty(), "{report:?}");
            // Played: the MachineSnapshot controller reports each one taken.
            for made in &report.made {
                let name = made.rsplit('/').next().unwrap_or_default();
                snaps
                    .patch_status(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({"status": {"phase": "Succeeded"}})),
                    )
                    .await?;
            }
            Ok::<_, kube::Error>(report)
        }
    };

    // Not due yet: nothing.
    check(first - chrono::Duration::minutes(1))
        .await
        .expect("tick");
    assert_eq!(names(&snaps).await, ["cron-by-hand"]);
    // Due: one, and only one however often it is checked within the hour.
    for minute in [0, 1, 59] {
        check(first + chrono::Duration::minutes(minute))
            .await
            .expect("tick");
    }
    assert_eq!(names(&snaps).await, [stamp(first), "cron-by-hand".into()]);
    let made = snaps.get(&stamp(first)).await.expect("scheduled");
    assert_eq!(
        made.labels().get(SCHEDULED_LABEL).map(String::as_str),
        Some("true")
    );
    assert_eq!(made.spec.machine_name, "cron");

    // Down for three hours: one catch-up, for the latest due time.
    let back = first + chrono::Duration::hours(3) + chrono::Duration::minutes(20);
    check(back).await.expect("tick");
    let latest = first + chrono::Duration::hours(3);
    assert_eq!(
        names(&snaps).await,
        [stamp(first), stamp(latest), "cron-by-hand".into()]
    );
    // The next due time: a third scheduled one, so once it is taken the oldest goes (keep 2).
    let next = latest + chrono::Duration::hours(1);
    check(next).await.expect("tick");
    check(next).await.expect("tick");
    assert_eq!(
        names(&snaps).await,
        [stamp(latest), stamp(next), "cron-by-hand".into()]
    );
    let scheduled = snaps
        .list(&ListParams::default().labels(&format!("{SCHEDULED_LABEL}=true")))
        .await
        .expect("list");
    assert_eq!(scheduled.items.len(), 2, "exactly keep");
    // Machine `plain` has no schedule: nothing of it.
    assert!(names(&snaps).await.iter().all(|n| !n.starts_with("plain")));
}
