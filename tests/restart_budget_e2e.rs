//! Issue 33, a restart budget: on a real control plane with `kubevirt-operator run
//! --max-concurrent-restarts 3`, playing KubeVirt (each Machine's VMI running; after the change
//! the VM says `RestartRequired`; a deleted VMI is replaced by a new one that reaches `Running` a
//! moment later, as the VM controller and virt-handler do): twenty Machines changed at once under
//! `updateStrategy: Restart` are all restarted, once each, and the VMI watch never counts more
//! than three restarting at once (deleted, its successor not yet Running). The ones waiting show
//! `RestartPending` with their place and the budget, and a `RestartPending` Event; none is left
//! showing it at the end.

mod access;
mod kubevirt;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use access::machine_object as machine;
use access::{create_admitted, fixture, machines, start_operator, wait_status};
use kubevirt_operator::api::Machine;
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};

const NS: &str = "team-a";
const MACHINES: usize = 20;
const BUDGET: usize = 3;
const WAIT: Duration = Duration::from_secs(240);

/// What the VMI watch saw.
#[derive(Default, Debug)]
struct Seen {
    /// Machines whose VMI was deleted and whose new one is not Running yet.
    restarting: BTreeSet<String>,
    most: usize,
    /// Deletions per Machine.
    deleted: BTreeMap<String, usize>,
    /// Machines whose new VMI ran.
    done: BTreeSet<String>,
}

fn phase(v: &VirtualMachineInstance) -> Option<&str> {
    v.status.as_ref()?.phase.as_deref()
}

/// Plays KubeVirt on every VMI deletion and counts restarts from the watch; new VMIs boot only
/// while `hold` is false.
fn play_kubevirt(
    admin: Client,
    seen: Arc<Mutex<Seen>>,
    hold: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(admin.clone(), NS);
    tokio::spawn(async move {
        let mut events = watcher(vmis, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            let Ok(mut seen) = seen.lock() else { return };
            match event {
                watcher::Event::Delete(v) => {
                    let name = v.name_any();
                    seen.restarting.insert(name.clone());
                    seen.most = seen.most.max(seen.restarting.len());
                    *seen.deleted.entry(name.clone()).or_default() += 1;
                    // The VM controller starts a new VMI; it runs once virt-handler has booted it.
                    let (admin, mut hold) = (admin.clone(), hold.clone());
                    tokio::spawn(async move {
                        kubevirt::vmi(&admin, NS, &name, json!({"phase": "Scheduling"})).await;
                        let _ = hold.wait_for(|h| !h).await;
                        tokio::time::sleep(Duration::from_millis(1500)).await; // the boot
                        let running = json!({"phase": "Running", "nodeName": "n2"});
                        kubevirt::vmi(&admin, NS, &name, running).await;
                    });
                }
                watcher::Event::Apply(v) if phase(&v) == Some("Running") => {
                    let name = v.name_any();
                    if seen.restarting.remove(&name) {
                        seen.done.insert(name);
                    }
                }
                _ => {}
            }
        }
    })
}

fn pending(m: &Machine) -> Option<(String, String)> {
    let c = (m.status.as_ref()?.conditions.iter()).find(|c| c.type_ == "RestartPending")?;
    Some((c.status.clone(), c.message.clone()))
}

/// Machines `names` under `updateStrategy: Restart`, each VM made and its VMI running; the time
/// after every VMI's creation (seconds only) from which KubeVirt may say RestartRequired.
async fn running(admin: &Client, op: &support::Proc, names: &[String]) -> Timestamp {
    let spec = json!({"template": "small", "updateStrategy": "Restart"});
    let objects: Vec<_> = names.iter().map(|n| machine(n, spec.clone())).collect();
    let dynamic = machines(admin, NS);
    join_all(objects.iter().map(|m| create_admitted(&dynamic, m, op))).await;
    for n in names {
        wait_status(admin, NS, n, op, "the VM made", |s| s.vm_name.is_some()).await;
        kubevirt::vmi(admin, NS, n, json!({"phase": "Running", "nodeName": "n1"})).await;
    }
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(admin.clone(), NS);
    let created = join_all(names.iter().map(|n| vmis.get(n))).await;
    let newest = (created.into_iter())
        .filter_map(|v| Some(v.ok()?.metadata.creation_timestamp?.0))
        .max()
        .expect("the VMIs");
    let since = Timestamp::from_second(newest.as_second() + 1).expect("time");
    support::eventually(Duration::from_secs(5), "the second to pass", || async {
        (Timestamp::now() >= since).then_some(())
    })
    .await;
    since
}

/// Every Machine changed at once, and every VM saying RestartRequired (since `since`).
async fn change_all(admin: &Client, names: &[String], since: Timestamp) {
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let change =
        Patch::Merge(json!({"spec": {"domain": {"firmware": {"bootloader": {"efi": true}}}}}));
    let params = PatchParams::default();
    join_all((names.iter()).map(|n| api.patch(n, &params, &change)))
        .await
        .into_iter()
        .for_each(|r| {
            r.expect("a change that needs a restart");
        });
    let required = Patch::Merge(json!({"status": {"printableStatus": "Running",
        "conditions": [{"type": "RestartRequired", "status": "True",
            "lastTransitionTime": since.to_string(),
            "message": "a non-live-updatable field was changed in the template spec"}]}}));
    join_all((names.iter()).map(|n| vms.patch_status(n, &params, &required)))
        .await
        .into_iter()
        .for_each(|r| {
            r.expect("VM status");
        });
}

/// Machines showing `RestartPending` with `status`.
async fn showing(api: &Api<Machine>, status: &str) -> Option<Vec<(String, String)>> {
    let listed = api.list(&Default::default()).await.ok()?;
    let found = (listed.items.iter())
        .filter_map(|m| Some((m.name_any(), pending(m)?)))
        .filter(|(_, (s, _))| s == status)
        .map(|(n, (_, message))| (n, message))
        .collect();
    Some(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_machines_changed_at_once_restart_at_most_three_at_a_time() {
    let budget = BUDGET.to_string();
    let env = fixture(&["--max-concurrent-restarts", &budget])
        .start()
        .await;
    let (admin, op) = (env.admin_client().await, env.replica());
    let names: Vec<String> = (0..MACHINES).map(|i| format!("m{i:02}")).collect();
    let since = running(&admin, op, &names).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (_hold, not_held) = watch::channel(false);
    let kubevirt = play_kubevirt(admin.clone(), seen.clone(), not_held);
    change_all(&admin, &names, since).await;

    // Every Machine restarted; meanwhile, waiting ones say so.
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    let waiting = Mutex::new(None);
    support::eventually_with(
        WAIT,
        "every Machine restarted",
        || {
            format!(
                "{:?}\n{}",
                seen.lock().map(|s| format!("{s:?}")),
                op.log_tail(30)
            )
        },
        || async {
            let first = showing(&api, "True").await?.into_iter().next();
            if let (Ok(mut w), Some((_, message))) = (waiting.lock(), first) {
                w.get_or_insert(message);
            }
            let seen = seen.lock().ok()?;
            (seen.done.len() == MACHINES).then_some(())
        },
    )
    .await;
    kubevirt.abort();
    {
        let seen = seen.lock().expect("counts");
        assert!(seen.most <= BUDGET, "restarting at once: {seen:?}");
        assert_eq!(seen.most, BUDGET, "the budget was used: {seen:?}");
        let once = seen.deleted.values().all(|n| *n == 1);
        assert!(once, "once each: {seen:?}");
    }
    let waiting = waiting.into_inner().expect("lock");
    let message = waiting.expect("a Machine shown RestartPending=True while waiting");
    assert!(message.contains("in line"), "{message}");
    assert!(message.contains("at most 3 at once"), "{message}");

    // A RestartPending Event, and no Machine left showing the condition.
    support::eventually(WAIT, "a RestartPending Event", || async {
        let mut all = Vec::new();
        for n in &names {
            all.extend(support::events_about(&admin, NS, n).await);
        }
        all.into_iter()
            .find(|(_, reason, _)| reason == "RestartPending")
    })
    .await;
    support::eventually_with(
        WAIT,
        "RestartPending gone from every Machine",
        || op.log_tail(30),
        || async {
            showing(&api, "True")
                .await
                .zip(showing(&api, "False").await)
                .filter(|(a, b)| a.is_empty() && b.is_empty())
        },
    )
    .await;
}

/// The budget survives a leader change: with three restarts under way (their new VMIs not yet
/// booted) and six waiting, the leader is killed; the next one reads the `RestartPending`
/// conditions back and still lets no more than three restart at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_keeps_the_budget_of_the_last() {
    let extra = ["--max-concurrent-restarts", "3"];
    let mut env = fixture(&extra).start().await;
    let (admin, mut op) = env.take_replica().await;
    let names: Vec<String> = (0..9).map(|i| format!("l{i}")).collect();
    let since = running(&admin, &op, &names).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (hold, held) = watch::channel(true);
    let kubevirt = play_kubevirt(admin.clone(), seen.clone(), held);
    change_all(&admin, &names, since).await;
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    support::eventually_with(
        WAIT,
        "three restarting and six waiting, as the conditions say",
        || {
            format!(
                "{:?}\n{}",
                seen.lock().map(|s| format!("{s:?}")),
                op.log_tail(30)
            )
        },
        || async {
            let (waiting, restarting) =
                (showing(&api, "True").await?, showing(&api, "False").await?);
            let counted = seen.lock().ok()?.restarting.len();
            (waiting.len() == 6 && restarting.len() == 3 && counted == 3).then_some(())
        },
    )
    .await;

    op.kill();
    let op = start_operator(&env, access::OP_NS, &extra).await;
    // The new leader works (a Machine created now gets its VM); the waiting ones were listed
    // before it, so they were looked at first.
    let spec = json!({"template": "small"});
    create_admitted(&machines(&admin, NS), &machine("probe", spec), &op).await;
    wait_status(&admin, NS, "probe", &op, "the new leader at work", |s| {
        s.vm_name.is_some()
    })
    .await;
    hold.send_replace(false);
    support::eventually_with(
        WAIT,
        "every Machine restarted",
        || {
            format!(
                "{:?}\n{}",
                seen.lock().map(|s| format!("{s:?}")),
                op.log_tail(30)
            )
        },
        || async { (seen.lock().ok()?.done.len() == names.len()).then_some(()) },
    )
    .await;
    kubevirt.abort();
    let seen = seen.lock().expect("counts");
    assert!(
        seen.most <= 3,
        "restarting at once across the leader change: {seen:?}"
    );
    assert!(
        seen.deleted.values().all(|n| *n == 1),
        "once each: {seen:?}"
    );
}
