//! What every reconcile shares: settings, clients, the watch caches and our recent writes.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::Resource;
use kube::runtime::reflector::{self, Store, store::Writer};
use tokio::sync::watch;

use crate::api::{Machine, MachineRestore, MachineSnapshot, MachineStatus, NetworkConfiguration};
use crate::classes::LiveCatalog;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::telemetry::Metrics;

use super::metrics::BindTimes;
use super::readiness::State;
use super::watches::{Scope, key_of};
use crate::reconciler::act::events::Publisher;
use crate::reconciler::apis::cdi::{DataVolume, StorageProfile};
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::store::last_write::LastWrite;
use crate::reconciler::store::packed::Packed;
use crate::reconciler::store::per_machine::PerMachine;
use crate::reconciler::store::presence::Presence;
use crate::reconciler::store::served_status::ServedStatus;

/// How the reconciler runs.
#[derive(Clone, Debug)]
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

/// The watch caches the reconcile reads. Machines, VMs, VMIs and claims, the caches that grow
/// with the Machines, are kept packed (see [`Packed`]).
#[derive(Clone)]
pub struct Stores {
    pub machines: Store<Packed<Machine>>,
    pub vms: Store<Packed<VirtualMachine>>,
    pub vmis: Store<Packed<VirtualMachineInstance>>,
    pub pvcs: Store<Packed<PersistentVolumeClaim>>,
    pub network_configurations: Store<NetworkConfiguration>,
    /// Empty (never filled) when Multus is not installed.
    pub nads: Store<Packed<NetworkAttachmentDefinition>>,
    pub storage_classes: Store<StorageClass>,
    /// Every VM, claim and attachment in scope by name, ours or not.
    pub vm_names: Presence,
    pub pvc_names: Presence,
    pub nad_names: Presence,
    /// Our DataVolumes, and every DataVolume's name; empty when CDI is not installed.
    pub data_volumes: Store<Packed<DataVolume>>,
    pub dv_names: Presence,
    /// CDI's StorageProfiles (one per StorageClass); empty when CDI is not installed.
    pub storage_profiles: Store<StorageProfile>,
    /// MachineRestores: one in a holding step leaves the VM and disks to it. Empty when the
    /// MachineRestore CRD is not installed.
    pub restores: Store<MachineRestore>,
    /// MachineSnapshots, for `status.snapshots` and `SnapshotsReady`; empty without the CRD.
    pub snapshots: Store<MachineSnapshot>,
}

/// The writing halves of [`Stores`], for the watches that fill them (the [`Presence`] sets are
/// filled through themselves).
pub struct Writers {
    pub machines: Writer<Packed<Machine>>,
    pub vms: Writer<Packed<VirtualMachine>>,
    pub vmis: Writer<Packed<VirtualMachineInstance>>,
    pub pvcs: Writer<Packed<PersistentVolumeClaim>>,
    pub network_configurations: Writer<NetworkConfiguration>,
    pub nads: Writer<Packed<NetworkAttachmentDefinition>>,
    pub storage_classes: Writer<StorageClass>,
    pub data_volumes: Writer<Packed<DataVolume>>,
    pub storage_profiles: Writer<StorageProfile>,
    pub restores: Writer<MachineRestore>,
    pub snapshots: Writer<MachineSnapshot>,
}

impl Stores {
    /// Empty caches and the writers that fill them.
    pub fn new() -> (Stores, Writers) {
        let (machines, machines_w) = reflector::store();
        let (vms, vms_w) = reflector::store();
        let (vmis, vmis_w) = reflector::store();
        let (pvcs, pvcs_w) = reflector::store();
        let (network_configurations, ncs_w) = reflector::store();
        let (nads, nads_w) = reflector::store();
        let (storage_classes, scs_w) = reflector::store();
        let (data_volumes, dvs_w) = reflector::store();
        let (storage_profiles, sps_w) = reflector::store();
        let (restores, restores_w) = reflector::store();
        let (snapshots, snapshots_w) = reflector::store();
        let stores = Stores {
            machines,
            vms,
            vmis,
            pvcs,
            network_configurations,
            nads,
            storage_classes,
            vm_names: Presence::default(),
            pvc_names: Presence::default(),
            nad_names: Presence::default(),
            data_volumes,
            dv_names: Presence::default(),
            storage_profiles,
            restores,
            snapshots,
        };
        let writers = Writers {
            machines: machines_w,
            vms: vms_w,
            vmis: vmis_w,
            pvcs: pvcs_w,
            network_configurations: ncs_w,
            nads: nads_w,
            storage_classes: scs_w,
            data_volumes: dvs_w,
            storage_profiles: sps_w,
            restores: restores_w,
            snapshots: snapshots_w,
        };
        (stores, writers)
    }
}

/// Our latest writes, standing in for the caches until they catch up (see [`LastWrite`]).
#[derive(Default)]
pub struct Written {
    pub statuses: LastWrite<MachineStatus>,
    pub vms: LastWrite<VirtualMachine>,
    pub pvcs: LastWrite<PersistentVolumeClaim>,
    pub nads: LastWrite<NetworkAttachmentDefinition>,
    pub secrets: LastWrite<Secret>,
    pub data_volumes: LastWrite<DataVolume>,
}

pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub events: Publisher,
    pub stores: Stores,
    pub state: Arc<State>,
    pub written: Arc<Written>,
    /// Whether the NetworkAttachmentDefinition API was served when the controller started.
    pub multus_installed: bool,
    /// Whether CDI's DataVolume API was served when the controller started.
    pub cdi_installed: bool,
    /// Whether the MachineRestore and MachineSnapshot APIs were served when the controller
    /// started.
    pub restores_served: bool,
    /// Whether KubeVirt's VirtualMachineSnapshot API was served when the controller started.
    pub kubevirt_snapshots: bool,
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
