//! Issue 32, what the snapshot schedule costs the API server: 1,000 Machines on schedules, the
//! scheduler (`scheduler::run`, its watches and ticks) on a real API server with a clock the test
//! moves, every request it makes counted from the API server's audit log (its own user). Not
//! due: no request per tick (no list, no GET per Machine); due: one create per Machine (and a
//! GET only after a 409 on a name, to tell ours from another's). Prints the figures (`cargo test --test snapshot_schedule_load_e2e -- --nocapture`).

mod scheduling;
mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Timelike, Utc};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use kubevirt_operator::api::Machine;
use kubevirt_operator::api::snapshots::MachineSnapshot;
use kubevirt_operator::reconciler::decide::evidence::OwnershipKey;
use kubevirt_operator::reconciler::run::watches::Scope;
use kubevirt_operator::snapshots::Clock;
use kubevirt_operator::snapshots::context::{Context, Limits, Settings};
use kubevirt_operator::snapshots::scheduler;
use scheduling::Hands;
use support::{ControlPlane, Fixture};

const MACHINES: usize = 1000;
const TICK: Duration = Duration::from_millis(500);

/// The test's clock, counting the scheduler's ticks: each reads it once, first thing.
struct Ticks {
    hands: Hands,
    reads: AtomicUsize,
}

impl Clock for Ticks {
    fn now(&self) -> DateTime<Utc> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.hands.now()
    }
}

impl Ticks {
    /// Waits until `n` more ticks have ended (the one after them has started).
    async fn pass(&self, n: usize) {
        let from = self.reads.load(Ordering::SeqCst);
        // A tick every 500 ms; on a busy machine each may take up to ten times as long.
        let timeout = TICK * 10 * u32::try_from(n + 1).expect("ticks");
        support::eventually(timeout, &format!("{n} ticks"), || async {
            (self.reads.load(Ordering::SeqCst) > from + n).then_some(())
        })
        .await;
    }
}

/// The scheduler's requests so far, by `verb resource`.
fn requests(cp: &ControlPlane) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for r in cp.audited_requests().expect("audit log") {
        if r.user == "scheduler" && r.api_group == "vitistack.io" {
            *by.entry(format!("{} {}", r.verb, r.resource)).or_default() += 1;
        }
    }
    by
}

fn diff(
    after: &BTreeMap<String, usize>,
    before: &BTreeMap<String, usize>,
) -> BTreeMap<String, usize> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_costs_no_request_per_tick_until_due_and_one_create_per_due_machine() {
    let ns = "load";
    let cp = Fixture::new()
        .with_all_crds()
        .namespace(ns)
        // The scheduler's own user, so that its requests can be told apart.
        .user("scheduler", &["system:masters"])
        .start()
        .await;
    let admin = cp.admin_client().await;
    let machines: Api<Machine> = Api::namespaced(admin.clone(), ns);
    let mut latest = None;
    for i in 0..MACHINES {
        let m: Machine = serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": format!("m{i:04}")},
            "spec": {"template": "small", "snapshots": {"schedule": "0 * * * *"}}
        }))
        .expect("machine");
        latest = Some(
            machines
                .create(&PostParams::default(), &m)
                .await
                .expect("machine"),
        );
    }
    let created = latest
        .and_then(|m| m.metadata.creation_timestamp)
        .expect("created")
        .0;
    let created = DateTime::<Utc>::from_timestamp(created.as_second(), 0).expect("time");
    let due = (created + chrono::Duration::hours(1))
        .with_minute(0)
        .and_then(|t| t.with_second(0))
        .expect("hour");

    let clock = Arc::new(Ticks {
        hands: Hands(Mutex::new(due - chrono::Duration::minutes(30))),
        reads: AtomicUsize::new(0),
    });
    let ctx = Arc::new(Context {
        client: cp.client_of("scheduler").await,
        settings: Settings {
            scopes: vec![Scope::All],
            namespace: "unused".into(),
            clock: clock.clone(),
            tick: TICK,
            limits: Limits {
                max_in_flight: MACHINES,
                ..Limits::default()
            },
            pause_image: kubevirt_operator::snapshots::context::DEFAULT_PAUSE_IMAGE.to_owned(),
            clusters: Default::default(),
            default_kubevirt_config: None,
        },
        key: OwnershipKey::new(&[7; 32], None).expect("key"),
        kubevirt: true,
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn({
        let ctx = ctx.clone();
        async move {
            scheduler::run(ctx, &Scope::All, async {
                let _ = stopped.await;
            })
            .await;
        }
    });

    // Started: its initial lists (then watches): the Machines in pages of 500 (kube's watcher
    // default), the snapshots (none yet) in one. Then twenty ticks, nothing due.
    let started = support::eventually_with(
        Duration::from_secs(60),
        "the scheduler's lists",
        String::new,
        || async {
            let r = requests(&cp);
            let pages = r.get("list machines").copied().unwrap_or(0);
            (pages >= MACHINES.div_ceil(500) && r.contains_key("list machinesnapshots"))
                .then_some(r)
        },
    )
    .await;
    let quiet = 20;
    clock.pass(quiet).await;
    let idle = diff(&requests(&cp), &started);
    println!("{MACHINES} Machines on schedules, start-up: {started:?}");
    println!("{quiet} ticks, none due: {idle:?}");
    assert!(idle.is_empty(), "requests while nothing is due: {idle:?}");

    // Due: one create per Machine, and nothing else.
    let before = requests(&cp);
    let t0 = Instant::now();
    clock.hands.set(due);
    let snaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), ns);
    support::eventually_with(
        Duration::from_secs(300),
        "a snapshot per Machine",
        String::new,
        || async {
            let n = snaps.list(&ListParams::default()).await.ok()?.items.len();
            (n == MACHINES).then_some(())
        },
    )
    .await;
    let took = t0.elapsed();
    // A few more ticks once every one is made: nothing more.
    clock.pass(10).await;
    let at_due = diff(&requests(&cp), &before);
    println!("due: {at_due:?} in {took:?}, then 10 ticks more");
    // One create per Machine; a tick that starts before the watch shows the last ones made may
    // ask again: the API server answers 409 and one GET shows the snapshot is ours (it stands).
    let creates = at_due.get("create machinesnapshots").copied().unwrap_or(0);
    let gets = at_due.get("get machinesnapshots").copied().unwrap_or(0);
    assert_eq!(creates - gets, MACHINES, "{at_due:?}");
    assert!(gets <= MACHINES / 100, "{at_due:?}");
    let other: Vec<&String> = at_due
        .keys()
        .filter(|k| !["create machinesnapshots", "get machinesnapshots"].contains(&k.as_str()))
        .collect();
    assert!(other.is_empty(), "{at_due:?}");
    assert_eq!(
        snaps
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        MACHINES,
        "one snapshot per Machine"
    );
    let _ = stop.send(());
    task.await.expect("scheduler");
}
