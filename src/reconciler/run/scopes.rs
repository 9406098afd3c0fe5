//! The reconciler over its watch scopes (`--watch-namespaces`): one controller for every
//! namespace, or one controller per namespace listed.
//!
//! One controller per namespace rather than one over merged watches: a watcher's list replaces
//! its cache whole when it completes, so the lists of several namespaces cannot share a cache.
//! Each controller has its own caches and readiness; `/readyz` waits for all of them, and the
//! gauges count all of them.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::join_all;

use super::cluster::ClusterStores;
use super::context::{Clients, Settings, Stores};
use super::controller::run_scope;
use super::key_evidence::gather;
use super::metrics::{refresh_data_volumes, refresh_gauges};
use super::ownership_key::settle_key;
use super::readiness::State;

const GAUGE_REFRESH: Duration = Duration::from_secs(5);
/// DataVolume gauges decode every DataVolume: every sixth refresh (30 s), or when their number
/// changed.
const DATA_VOLUME_ROUNDS: u64 = 6;

/// Runs the reconciler until `shutdown` resolves; `state` is synced once every scope's caches
/// are.
pub async fn run(
    clients: Clients,
    settings: Settings,
    state: Arc<State>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let shutdown = shutdown.shared();
    state.set_caches_synced(false);
    // A warning at most: never holds up the start.
    tokio::spawn(super::served_crd::check(clients.api.clone()));
    // Nothing can be told ours without the key: no controller starts before it is read.
    let evidence = || gather(&clients.api, &settings.scopes, &settings.clusters);
    let key = settle_key(
        &clients.api,
        &settings.namespace,
        settings.new_ownership_key,
        evidence,
    );
    let key = tokio::select! {
        key = key => key,
        () = shutdown.clone() => return,
    };
    let scopes: Vec<_> = settings
        .scopes
        .iter()
        .map(|scope| {
            let stores = (Stores::new(), ClusterStores::new());
            (scope.clone(), stores, Arc::new(State::default()))
        })
        .collect();
    let all: Vec<(Stores, ClusterStores)> = (scopes.iter())
        .map(|(_, ((s, _), (c, _)), _)| (s.clone(), c.clone()))
        .collect();
    // A new term's restart budget: rebuilt from every scope's Machines.
    let budget_machines = all.iter().map(|(s, _)| s.machines.clone()).collect();
    settings.restart_budget.start_term(budget_machines);
    let parts: Vec<Arc<State>> = scopes.iter().map(|(_, _, s)| s.clone()).collect();
    let synced = tokio::spawn(async move {
        join_all(parts.iter().map(|p| p.synced())).await;
        state.set_caches_synced(true);
    });
    // Gauges are recounted from the caches on a timer, not per reconcile (which would make a
    // resync of N Machines cost N² reads).
    let gauges = {
        let (metrics, catalog) = (settings.metrics.clone(), settings.catalog.clone());
        let per_cluster = settings.machines_per_cluster.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(GAUGE_REFRESH);
            let mut counted = None;
            for round in 0u64.. {
                tick.tick().await;
                refresh_gauges(
                    &metrics,
                    all.iter().flat_map(|(s, _)| s.machines.state()),
                    all.iter().flat_map(|(_, c)| c.vms.state()),
                    &catalog.load(),
                );
                let machines = all.iter().flat_map(|(s, _)| s.machines.state());
                let briefs: Vec<_> = machines.collect();
                per_cluster.count(briefs.iter().map(|m| m.brief()));
                let dvs: Vec<_> = (all.iter())
                    .flat_map(|(_, c)| c.data_volumes.state())
                    .collect();
                if round % DATA_VOLUME_ROUNDS == 0 || counted != Some(dvs.len()) {
                    counted = Some(dvs.len());
                    refresh_data_volumes(&metrics, dvs);
                }
            }
        })
    };
    join_all(scopes.into_iter().map(|(scope, (stores, local), part)| {
        run_scope(
            clients.clone(),
            settings.clone(),
            scope,
            (stores, local),
            part,
            key.clone(),
            shutdown.clone(),
        )
    }))
    .await;
    gauges.abort();
    synced.abort();
}
