//! apply → VM and spec change → VM: Machines written at a steady rate, each one's time from the
//! write's response to the watch event that shows its VM (created, or with the new cores). The
//! clock is this process's: the instant the create or patch returned, and the instant the
//! VirtualMachine watch delivered the event, so the figure includes the watch's own delay.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tokio::task::JoinSet;

use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

use crate::machine_api;

/// The cores a change sets (the medium template has 2).
pub const CHANGED_CORES: i64 = 3;

/// When each Machine's VM was first seen, and first seen with each number of cores.
#[derive(Default)]
struct Seen {
    first: Option<Instant>,
    with_cores: BTreeMap<i64, Instant>,
}

/// A watch on the namespace's VirtualMachines, keyed by the Machine that owns each.
pub struct VmWatch {
    seen: Arc<Mutex<HashMap<String, Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for VmWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl VmWatch {
    /// Starts the watch and returns once its initial list is in.
    pub async fn start(client: &Client, ns: &str) -> Result<VmWatch> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            ns,
            &ApiResource::erase::<VirtualMachine>(&()),
        );
        let seen: Arc<Mutex<HashMap<String, Seen>>> = Arc::default();
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let map = seen.clone();
        let task = tokio::spawn(async move {
            let mut synced = Some(synced_tx);
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = events.next().await {
                let at = Instant::now();
                let vm = match event {
                    Ok(watcher::Event::Apply(vm) | watcher::Event::InitApply(vm)) => vm,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = synced.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                let owner = vm
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .find(|o| o.kind == "Machine")
                    .map(|o| o.name.clone())
                    .or_else(|| vm.metadata.name.clone())
                    .unwrap_or_default();
                let cores = vm
                    .data
                    .pointer("/spec/template/spec/domain/cpu/cores")
                    .and_then(|c| c.as_i64());
                let Ok(mut map) = map.lock() else { return };
                let s = map.entry(owner).or_default();
                s.first.get_or_insert(at);
                if let Some(c) = cores {
                    s.with_cores.entry(c).or_insert(at);
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(600), synced_rx)
            .await
            .context("the VirtualMachine watch did not list within 600 s")??;
        Ok(VmWatch { seen, task })
    }

    /// When `machine`'s VM was first seen (with `cores`, if given).
    pub fn seen(&self, machine: &str, cores: Option<i64>) -> Option<Instant> {
        let map = self.seen.lock().ok()?;
        let s = map.get(machine)?;
        match cores {
            None => s.first,
            Some(c) => s.with_cores.get(&c).copied(),
        }
    }

    /// Waits until every Machine in `names` has been seen as asked.
    pub async fn wait_all(&self, names: &[String], cores: Option<i64>) -> Result<Vec<Instant>> {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let seen: Vec<Option<Instant>> = names.iter().map(|n| self.seen(n, cores)).collect();
            if seen.iter().all(Option::is_some) {
                return Ok(seen.into_iter().flatten().collect());
            }
            if Instant::now() > deadline {
                let missing = seen.iter().filter(|s| s.is_none()).count();
                bail!("{missing} of {} VMs not seen after 600 s", names.len());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The nearest-rank percentile of sorted seconds.
fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(i).copied().unwrap_or(0.0)
}

/// Writes `count` times at `qps` (each write its own task, so a slow answer does not shift the
/// schedule) and returns each write's Machine, send and response instants.
async fn paced<F, Fut>(count: usize, qps: f64, write: F) -> Result<Vec<(String, Instant, Instant)>>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<String>> + Send + 'static,
{
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / qps));
    let mut tasks = JoinSet::new();
    for i in 0..count {
        tick.tick().await;
        let fut = write(i);
        tasks.spawn(async move {
            let sent = Instant::now();
            let name = fut.await?;
            anyhow::Ok((i, name, sent, Instant::now()))
        });
    }
    let mut done = tasks
        .join_all()
        .await
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    done.sort_by_key(|d| d.0);
    Ok(done.into_iter().map(|(_, n, s, a)| (n, s, a)).collect())
}

/// The report line: write → response, and response → watch event, p50/p99/max; and the
/// latency of a few writes in order, which shows a queue building up when it grows.
fn summary(writes: &[(String, Instant, Instant)], seen: &[Instant], qps: f64) -> String {
    let secs = |d: Duration| d.as_secs_f64();
    let mut answer: Vec<f64> = writes.iter().map(|(_, s, a)| secs(*a - *s)).collect();
    let lat: Vec<f64> = writes
        .iter()
        .zip(seen)
        .map(|((_, _, a), v)| {
            if v >= a {
                secs(*v - *a)
            } else {
                -secs(*a - *v)
            }
        })
        .collect();
    let early = lat.iter().filter(|l| **l < 0.0).count();
    let mut sorted = lat.clone();
    sorted.sort_by(f64::total_cmp);
    answer.sort_by(f64::total_cmp);
    let n = lat.len();
    let along: Vec<String> = [0, n / 4, n / 2, 3 * n / 4, n.saturating_sub(1)]
        .iter()
        .map(|&i| format!("#{}: {:.3}", i + 1, lat.get(i).copied().unwrap_or(0.0)))
        .collect();
    let span = match (writes.first(), seen.iter().max()) {
        (Some((_, s, _)), Some(last)) => secs(*last - *s),
        _ => 0.0,
    };
    format!(
        "{n} writes at {qps}/s: response → VM p50 {:.3} s, p99 {:.3} s, max {:.3} s ({early} seen before the response); write → response p50 {:.3} s, p99 {:.3} s; in order {}; first write to last VM {span:.1} s",
        pct(&sorted, 0.5),
        pct(&sorted, 0.99),
        sorted.last().copied().unwrap_or(0.0),
        pct(&answer, 0.5),
        pct(&answer, 0.99),
        along.join(", "),
    )
}

/// apply → VM: `count` new Machines (`new-000`, ...), created as `kubectl apply` creates them.
pub async fn apply_to_vm(
    client: &Client,
    ns: &str,
    count: usize,
    qps: f64,
    watch: &VmWatch,
) -> Result<String> {
    let api = machine_api(client, ns);
    let writes = paced(count, qps, |i| {
        let api = api.clone();
        async move {
            let name = format!("new-{i:03}");
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                "metadata": {"name": name}, "spec": {"template": "medium"}
            }))?;
            api.create(&PostParams::default(), &obj).await?;
            Ok(name)
        }
    })
    .await?;
    let names: Vec<String> = writes.iter().map(|w| w.0.clone()).collect();
    let seen = watch.wait_all(&names, None).await?;
    Ok(summary(&writes, &seen, qps))
}

/// Sets `machine`'s cores, as `kubectl apply` of an edited manifest does.
pub async fn change_cores(client: &Client, ns: &str, machine: &str, cores: i64) -> Result<()> {
    let patch = json!({"spec": {"resources": {"cpu": {"cores": cores}}}});
    machine_api(client, ns)
        .patch(machine, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// spec change → VM: the cores of `count` converged Machines (`m-00000`, ...).
pub async fn change_to_vm(
    client: &Client,
    ns: &str,
    count: usize,
    qps: f64,
    watch: &VmWatch,
) -> Result<String> {
    let writes = paced(count, qps, |i| {
        let client = client.clone();
        let ns = ns.to_owned();
        async move {
            let name = format!("m-{i:05}");
            change_cores(&client, &ns, &name, CHANGED_CORES).await?;
            Ok(name)
        }
    })
    .await?;
    let names: Vec<String> = writes.iter().map(|w| w.0.clone()).collect();
    let seen = watch.wait_all(&names, Some(CHANGED_CORES)).await?;
    Ok(summary(&writes, &seen, qps))
}
