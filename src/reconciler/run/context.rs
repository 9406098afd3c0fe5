//! What every reconcile shares: settings, clients, the watch caches and our recent writes, and
//! the workload [`Cluster`]s.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::Resource;
use kube::runtime::reflector::{self, Store, store::Writer};
use tokio::sync::watch;

use crate::api::{Machine, MachineRestore, MachineSnapshot, MachineStatus, NetworkConfiguration};
use crate::classes::LiveCatalog;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::telemetry::Metrics;

use super::cluster::Cluster;
use super::metrics::BindTimes;
use super::readiness::State;
use super::remotes::Remotes;
use super::watches::{Scope, key_of};
use crate::reconciler::act::events::Publisher;
use crate::reconciler::store::last_write::LastWrite;
use crate::reconciler::store::packed::Packed;
use crate::reconciler::store::per_machine::PerMachine;
use crate::reconciler::store::served_status::ServedStatus;

/// How the reconciler runs.
#[derive(Clone)]
pub struct Settings {
    /// Resync period of every Machine (`RECONCILE_INTERVAL`), also the cap of error backoff.
    pub reconcile_interval: Duration,
    /// Machines reconciled at once (`MAX_CONCURRENT_RECONCILES`).
    pub max_concurrent_reconciles: u16,
    /// What Machines may ask for, with the MachineClasses as the watch last saw them.
    pub catalog: LiveCatalog,
    /// This replica's name in Events (and the Lease); the pod name in a cluster.
    pub instance: String,
    /// Where reconcile counts, durations and gauges go.
    pub metrics: Arc<Metrics>,
    /// The namespaces watched: every one, or one controller per namespace listed.
    pub scopes: Vec<Scope>,
    /// The operator's own namespace (`NAMESPACE`), where its ownership key lives.
    pub namespace: String,
    /// Status fields the served Machine CRD prunes, for the whole process (every scope and
    /// leader term).
    pub served_status: Arc<ServedStatus>,
    /// Each KubevirtConfig's health and client (filled by `clusters::run`).
    pub clusters: crate::clusters::Registry,
    /// Machines per KubevirtConfig, recounted with the gauges (its `status.machines`).
    pub machines_per_cluster: Arc<super::remotes::MachineCounts>,
    /// Where a Machine that names no KubevirtConfig goes (`--default-kubevirt-config`); the
    /// mutating webhook writes it into new Machines, so this serves those that bypassed it.
    pub default_kubevirt_config: Option<String>,
    /// `--new-ownership-key`: a missing key Secret is replaced even though objects made under
    /// the lost key exist (see `decide::key_start`).
    pub new_ownership_key: bool,
    /// How long a VM's node may be not Ready before the Machine says `NodeUnreachable`
    /// (`--node-unreachable-grace`).
    pub node_unreachable_grace: Duration,
    /// Restarts at once, cluster-wide and per namespace (`--max-concurrent-restarts`...), for
    /// the whole process (every scope and leader term).
    pub restart_budget: Arc<super::restart_budget::RestartBudget>,
}

/// The reconciler's API clients, each with its own rate limiter: Events go through their own
/// client, as controller-runtime's recorder does, so announcing a problem never delays the work;
/// the Lease has its own, so renewals never queue behind a backlog of reconcile writes.
#[derive(Clone)]
pub struct Clients {
    pub api: Client,
    pub events: Client,
    pub lease: Client,
}

impl From<Client> for Clients {
    /// One client for everything (tests, tools).
    fn from(client: Client) -> Self {
        Clients {
            api: client.clone(),
            events: client.clone(),
            lease: client,
        }
    }
}

/// The watch caches of the cluster the operator runs in that the reconcile reads (the workload
/// cluster's are a [`Cluster`]'s). Machines are kept packed (see [`Packed`]).
#[derive(Clone)]
pub struct Stores {
    pub machines: Store<Packed<Machine>>,
    pub network_configurations: Store<NetworkConfiguration>,
    /// MachineRestores: one in a holding step leaves the VM and disks to it. Empty when the
    /// MachineRestore CRD is not installed.
    pub restores: Store<MachineRestore>,
    /// MachineSnapshots, for `status.snapshots` and `SnapshotsReady`; empty without the CRD.
    pub snapshots: Store<MachineSnapshot>,
}

/// The writing halves of [`Stores`], for the watches that fill them.
pub struct Writers {
    pub machines: Writer<Packed<Machine>>,
    pub network_configurations: Writer<NetworkConfiguration>,
    pub restores: Writer<MachineRestore>,
    pub snapshots: Writer<MachineSnapshot>,
}

impl Stores {
    /// Empty caches and the writers that fill them.
    pub fn new() -> (Stores, Writers) {
        let (machines, machines_w) = reflector::store();
        let (network_configurations, ncs_w) = reflector::store();
        let (restores, restores_w) = reflector::store();
        let (snapshots, snapshots_w) = reflector::store();
        let stores = Stores {
            machines,
            network_configurations,
            restores,
            snapshots,
        };
        let writers = Writers {
            machines: machines_w,
            network_configurations: ncs_w,
            restores: restores_w,
            snapshots: snapshots_w,
        };
        (stores, writers)
    }
}

pub struct Context {
    /// The client of the cluster the operator runs in (Machines, their status, Secrets they name).
    pub client: Client,
    pub settings: Settings,
    pub events: Publisher,
    pub stores: Stores,
    pub state: Arc<State>,
    /// Our latest status writes, standing in for the Machine cache until it catches up.
    pub statuses: Arc<LastWrite<MachineStatus>>,
    /// Whether the MachineRestore and MachineSnapshot APIs were served when the controller
    /// started.
    pub restores_served: bool,
    /// The cluster the operator runs in, as a workload cluster.
    pub local: Arc<Cluster>,
    /// The remote clusters Machines of this scope use.
    pub remotes: Arc<Remotes>,
    /// Open once the caches are filled (or the wait ran out); reconciles wait for it.
    pub caches_ready: watch::Sender<bool>,
    /// What is remembered per Machine (failures, derived Secrets, status writes); pruned when
    /// the Machine goes.
    pub per_machine: Arc<PerMachine>,
    /// Pruned when a claim goes.
    pub bind_times: Arc<BindTimes>,
    /// Says which objects this operator made (see `decide::evidence`).
    pub ownership_key: OwnershipKey,
}

const FIRST_RETRY: Duration = Duration::from_secs(1);

impl Context {
    pub fn forget_failures(&self, machine: &impl Resource) {
        if let Ok(mut f) = self.per_machine.failures.lock() {
            f.remove(&key_of(machine));
        }
    }

    /// 1s, 2s, 4s, ... up to the resync interval.
    pub fn next_retry(&self, machine: &impl Resource) -> Duration {
        let n = match self.per_machine.failures.lock() {
            Ok(mut f) => {
                let n = f.entry(key_of(machine)).or_insert(0);
                *n = n.saturating_add(1);
                *n
            }
            Err(_) => 1,
        };
        let exp = FIRST_RETRY.saturating_mul(1u32 << (n - 1).min(16));
        exp.min(self.settings.reconcile_interval.max(FIRST_RETRY))
    }
}
