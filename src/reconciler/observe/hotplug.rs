//! What disk hot-plug reads: whether the cluster's KubeVirt serves it (its cached install
//! resource), and the claims and DataVolumes of hot-plugged disks removed from the spec.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::Api;

use super::lookup::lookup;
use crate::api::MachineSpec;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::decide::hotplug::{self, NotServed};
use crate::reconciler::decide::problem::Kind;
use crate::reconciler::run::cluster::Cluster;

/// What the cluster's cached `KubeVirt` resource says of hot-plug (none cached: not served).
pub(super) fn served(cluster: &Cluster) -> Result<(), NotServed> {
    let installs = cluster.stores.kubevirts.state();
    hotplug::served(hotplug::install(installs.iter().map(AsRef::as_ref)))
}

/// The claims and DataVolumes of the disks hot-plugged into the live `vm` that `spec` no
/// longer names, by name.
#[derive(Default)]
pub(super) struct Unplugged {
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    pub data_volumes: BTreeMap<String, DataVolume>,
}

pub(super) async fn unplugged(
    cluster: &Cluster,
    ns: &str,
    spec: &MachineSpec,
    vm: Option<&VirtualMachine>,
) -> Result<Unplugged, kube::Error> {
    let (stores, written, client) = (&cluster.stores, &cluster.written, &cluster.client);
    let disks: Vec<&str> = spec.disks.iter().map(|d| d.name.as_str()).collect();
    let mut out = Unplugged::default();
    for (kind, name) in hotplug::unplugged(vm, &disks) {
        if kind == Kind::Claim {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
            let caches = (&stores.pvcs, &stores.pvc_names, &*written.pvcs);
            if let Some(c) = lookup(cluster, caches, &api, ns, &name).await? {
                out.claims.insert(name, c);
            }
        } else if cluster.apis.cdi {
            let api: Api<DataVolume> = Api::namespaced(client.clone(), ns);
            let caches = (
                &stores.data_volumes,
                &stores.dv_names,
                &*written.data_volumes,
            );
            if let Some(d) = lookup(cluster, caches, &api, ns, &name).await? {
                out.data_volumes.insert(name, d);
            }
        }
    }
    Ok(out)
}
