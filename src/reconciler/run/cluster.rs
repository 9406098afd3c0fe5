//! The cluster a Machine's workload lives on: its client, the watch caches of its VMs, claims,
//! DataVolumes and attachments, our recent writes there, and which optional APIs it serves.
//!
//! Machines, their status, classes, snapshots and restores stay on the cluster the operator runs
//! in (the [`Context`](super::context::Context)); everything a Machine is turned into is read and
//! written through its [`Cluster`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::runtime::reflector::{self, Store, store::Writer};

use super::readiness::State;
use crate::clusters::Apis;
use crate::reconciler::apis::cdi::{DataVolume, StorageProfile};
use crate::reconciler::apis::kubevirt::{KubeVirt, VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::store::last_write::LastWrite;
use crate::reconciler::store::packed::Packed;
use crate::reconciler::store::presence::Presence;

/// One workload cluster, as the reconciler reads and writes it.
pub struct Cluster {
    /// The KubevirtConfig it is reached through; `None` for the cluster the operator runs in.
    pub name: Option<String>,
    /// A remote cluster's identity (its kube-system namespace's uid), recorded in the status of
    /// each Machine made there; `None` for the cluster the operator runs in.
    pub identity: Option<String>,
    /// The KubevirtConfig's `allowCrossNamespaceClones`: whether a DataSource there may point
    /// at another namespace (`decide::remote_clones`); false for the local cluster, whose
    /// clones admission pins.
    pub allow_cross_namespace_clones: bool,
    pub client: Client,
    pub stores: ClusterStores,
    pub written: ClusterWritten,
    /// Which optional APIs it served when its watches started.
    pub apis: Apis,
    /// Whether its caches are filled (the local cluster shares the scope's).
    pub state: Arc<State>,
    /// The key objects there are judged with (see `OwnershipKey::without_history`).
    pub key: OwnershipKey,
    /// Namespaces found ours there, and when: not asked for again for a while
    /// (`act::remote::namespace`).
    pub namespaces: Mutex<BTreeMap<String, std::time::Instant>>,
}

impl Cluster {
    /// Whether it is the cluster the operator runs in (where owner references reach Machines).
    pub fn is_local(&self) -> bool {
        self.name.is_none()
    }
}

/// The watch caches of one cluster. VMs, VMIs, claims, attachments and DataVolumes, the caches
/// that grow with the Machines, are kept packed (see [`Packed`]).
#[derive(Clone)]
pub struct ClusterStores {
    pub vms: Store<Packed<VirtualMachine>>,
    pub vmis: Store<Packed<VirtualMachineInstance>>,
    pub pvcs: Store<Packed<PersistentVolumeClaim>>,
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
    /// Each Node's name and `Ready` condition only; empty where Nodes cannot be listed.
    pub nodes: Store<Node>,
    /// KubeVirt's install resource (one, in practice): whether disks hot-plug there.
    pub kubevirts: Store<KubeVirt>,
}

/// The writing halves of [`ClusterStores`] (the [`Presence`] sets are filled through
/// themselves).
pub struct ClusterWriters {
    pub vms: Writer<Packed<VirtualMachine>>,
    pub vmis: Writer<Packed<VirtualMachineInstance>>,
    pub pvcs: Writer<Packed<PersistentVolumeClaim>>,
    pub nads: Writer<Packed<NetworkAttachmentDefinition>>,
    pub storage_classes: Writer<StorageClass>,
    pub data_volumes: Writer<Packed<DataVolume>>,
    pub storage_profiles: Writer<StorageProfile>,
    pub nodes: Writer<Node>,
    pub kubevirts: Writer<KubeVirt>,
}

impl ClusterStores {
    /// Empty caches and the writers that fill them.
    pub fn new() -> (ClusterStores, ClusterWriters) {
        let (vms, vms_w) = reflector::store();
        let (vmis, vmis_w) = reflector::store();
        let (pvcs, pvcs_w) = reflector::store();
        let (nads, nads_w) = reflector::store();
        let (storage_classes, scs_w) = reflector::store();
        let (data_volumes, dvs_w) = reflector::store();
        let (storage_profiles, sps_w) = reflector::store();
        let (nodes, nodes_w) = reflector::store();
        let (kubevirts, kubevirts_w) = reflector::store();
        let stores = ClusterStores {
            vms,
            vmis,
            pvcs,
            nads,
            storage_classes,
            vm_names: Presence::default(),
            pvc_names: Presence::default(),
            nad_names: Presence::default(),
            data_volumes,
            dv_names: Presence::default(),
            storage_profiles,
            nodes,
            kubevirts,
        };
        let writers = ClusterWriters {
            vms: vms_w,
            vmis: vmis_w,
            pvcs: pvcs_w,
            nads: nads_w,
            storage_classes: scs_w,
            data_volumes: dvs_w,
            storage_profiles: sps_w,
            nodes: nodes_w,
            kubevirts: kubevirts_w,
        };
        (stores, writers)
    }
}

/// Our latest writes on one cluster, standing in for its caches until they catch up (see
/// [`LastWrite`]).
#[derive(Clone, Default)]
pub struct ClusterWritten {
    pub vms: Arc<LastWrite<VirtualMachine>>,
    pub pvcs: Arc<LastWrite<PersistentVolumeClaim>>,
    pub nads: Arc<LastWrite<NetworkAttachmentDefinition>>,
    pub secrets: Arc<LastWrite<Secret>>,
    pub data_volumes: Arc<LastWrite<DataVolume>>,
}
