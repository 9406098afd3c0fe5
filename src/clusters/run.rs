//! The leader's controller (I/O): watches the KubevirtConfigs and keeps one [`Supervisor`] task
//! per config, restarted when its spec changes and stopped (its registry entry removed, its
//! client dropped) when it goes. Nothing starts when the KubevirtConfig CRD is not served.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use super::Settings;
use super::context::{Context, MachineCount};
use super::registry::Registry;
use super::supervisor::Supervisor;
use crate::api::kubevirt_config::{KubevirtConfig, KubevirtConfigSpec};
use crate::api::names::ACKNOWLEDGE_CLUSTER_ANNOTATION;
use crate::discovery;

/// A running supervisor and the spec (and acknowledgement) it was started for; aborted when
/// dropped.
struct Running {
    spec: KubevirtConfigSpec,
    generation: Option<i64>,
    acknowledged: Option<String>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Keeps `registry` filled from the KubevirtConfigs until `shutdown` resolves; then empties it
/// (a leader that stepped down holds no remote clients).
pub async fn run(
    management: Client,
    settings: Settings,
    registry: Registry,
    machines: MachineCount,
    shutdown: impl Future<Output = ()>,
) {
    let ctx = Arc::new(Context {
        client: management,
        settings,
        registry: registry.clone(),
        machines,
    });
    tokio::select! {
        () = follow(ctx) => {}
        () = shutdown => {}
    }
    registry.retain(|_| false);
    registry.set_listed(None);
    tracing::info!("remote cluster controller stopped");
}

async fn follow(ctx: Arc<Context>) {
    let served = discovery::serves(&ctx.client, "vitistack.io/v1alpha1", "kubevirtconfigs").await;
    if !served {
        tracing::warn!(
            "the KubevirtConfig CRD is not installed: no remote clusters; restart the operator after installing it"
        );
        return std::future::pending().await;
    }
    tracing::info!(probe_interval = ?ctx.settings.probe_interval, "watching KubevirtConfigs");
    let api: Api<KubevirtConfig> = Api::all(ctx.client.clone());
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    let mut listed: BTreeSet<String> = BTreeSet::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => listed.clear(),
            Ok(watcher::Event::InitApply(config)) => {
                listed.insert(config.name_any());
                upsert(&ctx, &mut running, config);
            }
            Ok(watcher::Event::InitDone) => {
                // Configs deleted while the watch was down.
                running.retain(|name, _| listed.contains(name));
                ctx.registry.retain(|name| listed.contains(name));
                ctx.registry.set_listed(Some(listed.clone()));
            }
            Ok(watcher::Event::Apply(config)) => {
                ctx.registry.listed_change(&config.name_any(), true);
                upsert(&ctx, &mut running, config);
            }
            Ok(watcher::Event::Delete(config)) => {
                let name = config.name_any();
                running.remove(&name);
                ctx.registry.remove(&name);
                ctx.registry.listed_change(&name, false);
                tracing::info!(config = %name, "KubevirtConfig deleted: its client is dropped");
            }
            Err(e) => tracing::warn!(error = %e, "watching KubevirtConfigs failed; retrying"),
        }
    }
}

/// Starts a supervisor for a new config, or a new one for a changed spec; a status update (our
/// own writes) changes neither.
fn upsert(ctx: &Arc<Context>, running: &mut BTreeMap<String, Running>, config: KubevirtConfig) {
    let name = config.name_any();
    let generation = config.metadata.generation;
    let acknowledged = (config.annotations())
        .get(ACKNOWLEDGE_CLUSTER_ANNOTATION)
        .cloned();
    if let Some(r) = running.get(&name)
        && r.spec == config.spec
        && r.generation == generation
        && r.acknowledged == acknowledged
    {
        return;
    }
    let spec = config.spec.clone();
    let task = tokio::spawn(Supervisor::new(ctx.clone(), config).run());
    // The old task, if any, is aborted when its entry is dropped here.
    running.insert(
        name,
        Running {
            spec,
            generation,
            acknowledged,
            task,
        },
    );
}
