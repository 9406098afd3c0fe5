//! The watches of one workload cluster (the local one or a remote one): they fill its
//! [`ClusterStores`], keep its [`ClusterWritten`] honest, and yield what changed, for the
//! Controller's triggers.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::runtime::watcher;

use super::cluster::{ClusterStores, ClusterWriters, ClusterWritten};
use super::metrics::BindTimes;
use super::watches::{self, Lists, Scope, ignore, managed};
use crate::clusters::Apis;
use crate::reconciler::MACHINE_LABEL;
use crate::reconciler::apis::cdi::{DataVolume, StorageProfile};
use crate::reconciler::apis::kubevirt::{KubeVirt, VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::store::packed::Packed;

type Changes<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// What each watch of a cluster yields; `None` for an optional API it does not serve.
pub struct Streams {
    pub vms: Changes<Packed<VirtualMachine>>,
    pub pvcs: Changes<Packed<PersistentVolumeClaim>>,
    pub vmis: Changes<Packed<VirtualMachineInstance>>,
    pub nads: Option<Changes<Packed<NetworkAttachmentDefinition>>>,
    pub data_volumes: Option<Changes<Packed<DataVolume>>>,
    pub storage_classes: Changes<StorageClass>,
    pub storage_profiles: Option<Changes<StorageProfile>>,
    /// KubeVirt's install resource, in whatever namespace it is (read for disk hot-plug); its
    /// changes reach Machines at their next reconcile.
    pub kubevirts: Option<Changes<KubeVirt>>,
    /// The Machines on a Node whose `Ready` changed (see [`nodes`](super::nodes)).
    pub nodes: BoxStream<'static, super::nodes::Trigger>,
    /// The names caches: they only fill sets, nothing is triggered by them.
    pub names: BoxFuture<'static, ()>,
}

/// The watches of the cluster `client` reaches (the KubevirtConfig `name`, `None` for the
/// local one), over `scope`.
pub fn streams(
    (client, name): (&Client, Option<&str>),
    scope: &Scope,
    (stores, writers): (&ClusterStores, ClusterWriters),
    written: &ClusterWritten,
    bind_times: Arc<BindTimes>,
    apis: Apis,
) -> Streams {
    // On the local cluster the Machines' own list reconciles every Machine once (the changed
    // first: `first_pass`); its objects' lists would queue all 10,000 again, unordered. A
    // remote cluster's relist still triggers its Machines.
    let lists = if name.is_none() {
        Lists::Quiet
    } else {
        Lists::Trigger
    };
    let w = written.vms.clone();
    let vms = watches::watch_packed(client, scope, managed(), (writers.vms, lists), move |s| {
        w.observed(s.key, s.resource_version)
    });
    let w = written.pvcs.clone();
    let pvcs = watches::watch_packed(client, scope, managed(), (writers.pvcs, lists), move |s| {
        w.observed(s.key, s.resource_version);
        if let Some(uid) = s.deleted {
            bind_times.forget(uid);
        }
    });
    let vmi_config = watcher::Config::default().labels(MACHINE_LABEL);
    let vmis = watches::watch_packed(client, scope, vmi_config, (writers.vmis, lists), ignore);
    let w = written.nads.clone();
    let nads = apis.multus.then(|| {
        watches::watch_packed(client, scope, managed(), (writers.nads, lists), move |s| {
            w.observed(s.key, s.resource_version)
        })
        .boxed()
    });
    let w = written.data_volumes.clone();
    let data_volumes = apis.cdi.then(|| {
        watches::watch_packed(
            client,
            scope,
            managed(),
            (writers.data_volumes, lists),
            move |s| w.observed(s.key, s.resource_version),
        )
        .boxed()
    });
    let storage_classes = watches::watch(
        client,
        scope,
        Default::default(),
        writers.storage_classes,
        ignore,
    );
    let storage_profiles = apis.storage_profiles.then(|| {
        let profiles = writers.storage_profiles;
        watches::watch(client, scope, Default::default(), profiles, ignore).boxed()
    });
    let kubevirts = apis.kubevirt_installs.then(|| {
        let installs = writers.kubevirts;
        watches::watch(client, &Scope::All, Default::default(), installs, ignore).boxed()
    });
    let nodes = super::nodes::watch(
        client,
        writers.nodes,
        stores.vmis.clone(),
        name.map(str::to_owned),
    );
    let names = {
        let s = stores;
        let vm = watches::names::<VirtualMachine>(client, scope, s.vm_names.clone());
        let pvc = watches::names::<PersistentVolumeClaim>(client, scope, s.pvc_names.clone());
        let nad = (apis.multus).then(|| {
            watches::names::<NetworkAttachmentDefinition>(client, scope, s.nad_names.clone())
        });
        let dv =
            (apis.cdi).then(|| watches::names::<DataVolume>(client, scope, s.dv_names.clone()));
        async move {
            futures::join!(
                vm,
                pvc,
                async {
                    if let Some(nad) = nad {
                        nad.await
                    }
                },
                async {
                    if let Some(dv) = dv {
                        dv.await
                    }
                }
            );
        }
        .boxed()
    };
    Streams {
        vms: vms.boxed(),
        pvcs: pvcs.boxed(),
        vmis: vmis.boxed(),
        nads,
        data_volumes,
        storage_classes: storage_classes.boxed(),
        storage_profiles,
        kubevirts,
        nodes,
        names,
    }
}
