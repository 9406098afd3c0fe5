//! The remote workload clusters of one watch scope: one [`Cluster`] (client, watches, caches)
//! per KubevirtConfig that a Machine uses, started on first use, restarted when its
//! KubevirtConfig's connection changes (credentials rotated), and stopped when no Machine uses it
//! or the KubevirtConfig goes.
//!
//! Ownership evidence travels with the objects (their made-for proof), as owner references
//! cannot cross clusters. The remote watches trigger Machines by the `vitistack.io/machine`
//! label of what changed (and the networks and StorageClasses they name).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::cluster::{Cluster, ClusterStores, ClusterWritten};
use super::cluster_watches;
use super::metrics::BindTimes;
use super::readiness::State;
use super::reprove::{self, Reproving};
use super::watches::{Scope, machines_using};
use crate::api::Machine;
use crate::clusters::Apis;
use crate::clusters::decide::identity::machine_waits;
use crate::clusters::{Health, Reason, Registry};
use crate::reconciler::MACHINE_LABEL;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::store::packed::Packed;

/// A Machine to reconcile.
pub type Trigger = ObjectRef<Packed<Machine>>;

/// Why a Machine's remote cluster cannot be worked on now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unready {
    /// One CamelCase word: the KubevirtConfig's own reason, `KubevirtConfigNotFound`, or
    /// `CachesFilling`.
    pub reason: String,
    pub message: String,
}

/// The `ClusterReady` reason of a Machine naming a KubevirtConfig that does not exist.
pub const NOT_FOUND: &str = "KubevirtConfigNotFound";
/// The `ClusterReady` reason of a reachable cluster without KubeVirt.
pub const KUBEVIRT_NOT_INSTALLED: &str = "KubeVirtNotInstalled";
/// The `ClusterReady` reason while a remote cluster's caches fill.
pub const CACHES_FILLING: &str = "CachesFilling";

struct Running {
    revision: String,
    cluster: Arc<Cluster>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The remote clusters of one scope.
pub struct Remotes {
    registry: Registry,
    scope: Scope,
    machines: Store<Packed<Machine>>,
    bind_times: Arc<BindTimes>,
    triggers: mpsc::UnboundedSender<Trigger>,
    key: OwnershipKey,
    /// Under a key that replaced a lost one: what re-proving each cluster's objects needs.
    reproving: Option<Reproving>,
    running: Mutex<BTreeMap<String, Running>>,
}

impl Remotes {
    /// `triggers` feeds the scope's Controller; `reproving` when the key replaced a lost one.
    pub fn new(
        registry: Registry,
        scope: Scope,
        machines: Store<Packed<Machine>>,
        bind_times: Arc<BindTimes>,
        (key, triggers, reproving): (
            OwnershipKey,
            mpsc::UnboundedSender<Trigger>,
            Option<Reproving>,
        ),
    ) -> Self {
        Remotes {
            key,
            registry,
            scope,
            machines,
            bind_times,
            triggers,
            reproving,
            running: Mutex::new(BTreeMap::new()),
        }
    }

    /// The cluster of KubevirtConfig `name`, once it is reachable and its caches are filled,
    /// for a Machine made on the cluster `made_on` (its status's identity; `None`: not made yet);
    /// its watches are started (or restarted on a new connection) here.
    pub fn cluster(&self, name: &str, made_on: Option<&str>) -> Result<Arc<Cluster>, Unready> {
        let connection = usable(self.registry.get(name), self.registry.exists(name))
            .map_err(|why| why.unwrap_or_else(|| filling(name)))?;
        let (found, ack) = (&connection.identity, connection.acknowledged.as_deref());
        if let Some(message) = machine_waits(name, made_on, found, ack) {
            let reason = Reason::ClusterChanged.as_str().to_owned();
            return Err(Unready { reason, message });
        }
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let current = running.get(name).filter(|r| {
            r.revision == connection.revision && r.cluster.identity.as_ref() == Some(found)
        });
        if let Some(r) = current {
            return match r.cluster.state.caches_synced() {
                true => Ok(r.cluster.clone()),
                false => Err(filling(name)),
            };
        }
        let apis = connection.apis;
        tracing::info!(cluster = name, revision = %connection.revision, "starting the watches of a remote cluster");
        let started = self.start(name, &connection, apis);
        running.insert(name.to_owned(), started);
        Err(filling(name))
    }

    fn start(&self, name: &str, connection: &crate::clusters::Connection, apis: Apis) -> Running {
        let (revision, client) = (&connection.revision, connection.client.clone());
        let (stores, writers) = ClusterStores::new();
        let cluster = Arc::new(Cluster {
            name: Some(name.to_owned()),
            identity: Some(connection.identity.clone()),
            allow_cross_namespace_clones: connection.allow_cross_namespace_clones,
            client: client.clone(),
            stores: stores.clone(),
            written: ClusterWritten::default(),
            apis,
            state: Arc::new(State::default()),
            key: self.key.clone(),
            namespaces: Default::default(),
        });
        let mut streams = cluster_watches::streams(
            (&client, Some(name)),
            &self.scope,
            (&stores, writers),
            &cluster.written,
            self.bind_times.clone(),
            apis,
        );
        let names = std::mem::replace(&mut streams.names, Box::pin(async {}));
        let names = tokio::spawn(names);
        let machines = self.machines.clone();
        let changes = changed_machines(streams, machines.clone());
        let tx = self.triggers.clone();
        let watches = tokio::spawn(changes.for_each(move |m| {
            let _ = tx.send(m);
            async {}
        }));
        // Once filled, every Machine of the cluster runs (those with nothing there yet too).
        let (filled, tx, me) = (cluster.clone(), self.triggers.clone(), name.to_owned());
        let reproving = self.reproving.clone();
        let ready = tokio::spawn(async move {
            if filled.stores.filled(filled.apis).await.is_ok() {
                if let Some(with) = &reproving {
                    reprove::run(&filled, &machines, with).await;
                }
                filled.state.set_caches_synced(true);
                tracing::info!(cluster = %me, "remote cluster's caches filled");
                for m in machines_using(&machines, None, |b| b.cluster.as_deref() == Some(&me)) {
                    let _ = tx.send(m);
                }
            }
        });
        Running {
            revision: revision.to_owned(),
            cluster,
            tasks: vec![names, watches, ready],
        }
    }

    /// Stops the clusters no Machine uses any more, and those whose KubevirtConfig went; wakes
    /// the Machines of every cluster in `changed`.
    pub fn sweep(&self, changed: &BTreeSet<String>) {
        let used: BTreeSet<String> = (self.machines.state().iter())
            .filter_map(|m| m.brief().cluster.as_deref().map(str::to_owned))
            .collect();
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.retain(|name, _| {
            let keep = used.contains(name) && self.registry.get(name).is_some();
            if !keep {
                tracing::info!(cluster = %name, "stopping the watches of a remote cluster: no Machine uses it, or its KubevirtConfig is gone");
            }
            keep
        });
        drop(running);
        for m in machines_using(&self.machines, None, |b| {
            b.cluster.as_deref().is_some_and(|c| changed.contains(c))
        }) {
            let _ = self.triggers.send(m);
        }
    }

    /// The names of the clusters whose watches run.
    pub fn running(&self) -> Vec<String> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.keys().cloned().collect()
    }
}

/// The connection a KubevirtConfig's health offers for Machines, or why there is none; `None`
/// while it is being checked (listed but not probed yet, or not listed yet: nothing to say).
/// Pure.
pub fn usable(
    health: Option<Health>,
    exists: Option<bool>,
) -> Result<Arc<crate::clusters::Connection>, Option<Unready>> {
    let unready = |reason: &str, message: String| {
        Err(Some(Unready {
            reason: reason.to_owned(),
            message,
        }))
    };
    match health {
        None if exists == Some(false) => unready(NOT_FOUND, "no such KubevirtConfig".to_owned()),
        None => Err(None),
        Some(Health::NotReady {
            reason, message, ..
        }) => unready(reason.as_str(), message),
        Some(Health::Ready(c)) if !c.apis.kubevirt => unready(
            KUBEVIRT_NOT_INSTALLED,
            "KubeVirt (kubevirt.io/v1 VirtualMachine) is not installed there".to_owned(),
        ),
        Some(Health::Ready(c)) => Ok(c),
    }
}

fn filling(name: &str) -> Unready {
    Unready {
        reason: CACHES_FILLING.to_owned(),
        message: format!("reading what is on cluster {name}"),
    }
}

/// The Machine an object there is labelled for, in the namespace of the same name.
fn labelled<K: kube::Resource>(o: &K) -> Option<Trigger> {
    let machine = o.labels().get(MACHINE_LABEL)?;
    Some(ObjectRef::new(machine).within(&o.namespace()?))
}

/// Every Machine a change on the remote cluster concerns.
fn changed_machines(
    s: cluster_watches::Streams,
    machines: Store<Packed<Machine>>,
) -> BoxStream<'static, Trigger> {
    fn by_label<K: kube::Resource + Send + 'static>(
        changes: BoxStream<'static, Result<K, kube::runtime::watcher::Error>>,
    ) -> BoxStream<'static, Trigger> {
        changes
            .filter_map(|r| async move { r.ok().as_ref().and_then(labelled) })
            .boxed()
    }
    let (m1, m2) = (machines.clone(), machines);
    let nads = s.nads.map(|nads| {
        nads.flat_map(move |r| {
            let name = r.as_ref().map(|n| (n.name_any(), n.namespace())).ok();
            let list = name.map_or_else(Vec::new, |(n, ns)| {
                machines_using(&m1, ns, |b| b.networks.iter().any(|x| **x == *n))
            });
            stream::iter(list)
        })
        .boxed()
    });
    let classes = s
        .storage_classes
        .flat_map(move |r| {
            let name = r.as_ref().map(|c| c.name_any()).ok();
            let list = name.map_or_else(Vec::new, |n| {
                machines_using(&m2, None, |b| b.storage_classes.iter().any(|x| **x == *n))
            });
            stream::iter(list)
        })
        .boxed();
    let mut all = vec![
        by_label(s.vms),
        by_label(s.pvcs),
        by_label(s.vmis),
        classes,
        s.nodes,
    ];
    all.extend(s.data_volumes.map(by_label));
    all.extend(nads);
    if let Some(profiles) = s.storage_profiles {
        // Drained so the cache fills; a profile's change reaches Machines at their next resync.
        all.push(profiles.filter_map(|_| async { None }).boxed());
    }
    if let Some(installs) = s.kubevirts {
        // Likewise: KubeVirt's configuration reaches Machines at their next reconcile.
        all.push(installs.filter_map(|_| async { None }).boxed());
    }
    stream::select_all(all).boxed()
}

/// Machines per remote cluster, as last counted from the caches.
#[derive(Debug, Default)]
pub struct MachineCounts(Mutex<BTreeMap<String, u32>>);

impl MachineCounts {
    pub fn get(&self, name: &str) -> u32 {
        let counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(name).copied().unwrap_or(0)
    }

    /// Recounts from the briefs of every Machine in scope.
    pub fn count<'m>(
        &self,
        machines: impl Iterator<Item = &'m crate::reconciler::store::packed::MachineBrief>,
    ) {
        let mut counts = BTreeMap::new();
        for cluster in machines.filter_map(|m| m.cluster.as_deref()) {
            *counts.entry(cluster.to_owned()).or_insert(0u32) += 1;
        }
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = counts;
    }
}

/// How often unused remote clusters are looked for, besides every KubevirtConfig change.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Keeps the scope's remote clusters to those in use, and wakes a cluster's Machines when its
/// KubevirtConfig's health changes (so `ClusterReady` follows it without waiting for a resync).
pub async fn sweep(remotes: Arc<Remotes>) {
    let mut health = remotes.registry.subscribe();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    loop {
        tokio::select! {
            changed = health.changed() => if changed.is_err() { return },
            _ = tick.tick() => {}
        }
        let now: BTreeMap<String, String> = (health.borrow_and_update().iter())
            .map(|(name, h)| (name.clone(), state_of(h)))
            .collect();
        let changed: BTreeSet<String> = (now.iter())
            .filter(|(name, s)| seen.get(*name) != Some(s))
            .map(|(name, _)| name.clone())
            .chain(seen.keys().filter(|n| !now.contains_key(*n)).cloned())
            .collect();
        seen = now;
        remotes.sweep(&changed);
    }
}

/// What a reader of a KubevirtConfig's health acts on: its reason and connection revision.
fn state_of(h: &Health) -> String {
    match h {
        Health::Ready(c) => format!("Ready/{}", c.revision),
        Health::NotReady { reason, .. } => reason.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests;
