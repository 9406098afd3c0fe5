//! The controller: the optional APIs it finds (`discovery`), the watches feeding the caches,
//! what triggers a Machine, and what is forgotten when a Machine or claim goes; each run is
//! `reconcile` (observe -> decide -> act).
//!
//! Triggers: a Machine's own VMs and PVCs (by owner), VMIs (by the `vitistack.io/machine` label
//! KubeVirt copies from the VM template), the Machines on a Node whose `Ready` changed (see
//! `nodes`), and NetworkConfigurations,
//! NetworkAttachmentDefinitions and StorageClasses (by the Machines that name them), CDI
//! DataVolumes (by that label, when CDI is installed); every
//! Machine also every `RECONCILE_INTERVAL`. Watch restarts, expired resource versions (410) and
//! API server outages are handled by each watcher's own backoff and re-list
//! (`tests/reconciler_restart.rs`).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;

use crate::api::{Machine, MachineRestore, MachineSnapshot, NetworkConfiguration};

pub use super::cluster::{Cluster, ClusterStores, ClusterWriters, ClusterWritten};
use super::cluster_watches;
pub use super::context::{Clients, Context, Settings, Stores, Writers};
use super::first_pass::Pacer;
use super::metrics::BindTimes;
use super::readiness::State;
use super::reconcile::{error_policy, reconcile};
use super::remotes::{self, Remotes};
use super::reprove::Reproving;
use super::watches::{self, Scope, ignore, machines_using};
use crate::clusters::Apis;
use crate::discovery;
use crate::reconciler::FIELD_MANAGER;
use crate::reconciler::act::events::Publisher;
use crate::reconciler::apis::cdi::StorageProfile;
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::store::last_write::LastWrite;
use crate::reconciler::store::packed::{Brief, Packed};
use crate::reconciler::store::per_machine::PerMachine;

/// The Controller's backoff on its merged trigger stream: none, because every watch above backs
/// off on its own errors (`default_backoff`). kube's default pauses the merged stream, so every
/// watch, on any one watch's error, and grows with each: after an API server restart, with
/// seven watches failing in turn, the watches resumed only minutes later.
struct EachWatchBacksOff;

impl Iterator for EachWatchBacksOff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

impl kube::runtime::utils::Backoff for EachWatchBacksOff {
    fn reset(&mut self) {}
}

/// Runs the controller of one watch `scope` until `shutdown` resolves, filling `stores` through
/// `writers`; `state` says when its caches are filled (see `super::scopes`).
pub async fn run_scope(
    clients: Clients,
    settings: Settings,
    scope: Scope,
    ((stores, writers), (local_stores, local_writers)): (
        (Stores, Writers),
        (ClusterStores, ClusterWriters),
    ),
    state: Arc<State>,
    ownership_key: OwnershipKey,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let client = clients.api.clone();
    let apis = tokio::select! {
        apis = discover(&client) => apis,
        () = shutdown.clone() => return,
    };
    let restores_served = apis.restores;
    let apis = apis.cluster;
    let machines = stores.machines.clone();

    let statuses = Arc::new(LastWrite::default());
    let written = ClusterWritten::default();
    let per_machine = Arc::new(PerMachine::default());
    let bind_times = Arc::new(BindTimes::default());
    let w = statuses.clone();
    let (machines_listed_tx, machines_listed) = watch::channel(false);
    let (memory, listed) = (per_machine.clone(), machines.clone());
    // A relist's converged Machines wait behind its changed ones (see `first_pass`).
    let (pacer, paced) = Pacer::new(settings.max_concurrent_reconciles);
    let machine_events = watches::packed_events::<Machine>(&client, &scope, Default::default())
        .reflect(writers.machines)
        .inspect(move |e| match e {
            // After `reflect`: the store holds the list by the time this is seen.
            Ok(watcher::Event::InitDone) => {
                machines_listed_tx.send_replace(true);
                // A (re)list reports no deletions: forget the Machines it no longer holds.
                memory.retain(|key| {
                    let (ns, name) = key.split_once('/').unwrap_or_default();
                    listed.get(&ObjectRef::new(name).within(ns)).is_some()
                });
            }
            Ok(watcher::Event::Delete(m)) => memory.forget(&watches::key_of(m)),
            _ => {}
        });
    let machine_stream = pacer
        .split(machine_events)
        .applied_objects()
        .inspect(move |r| {
            if let Ok(m) = r {
                w.observed(&watches::key_of(m), m.meta().resource_version.as_deref());
            }
        });
    let local_streams = cluster_watches::streams(
        (&client, None),
        &scope,
        (&local_stores, local_writers),
        &written,
        bind_times.clone(),
        apis,
    );
    let nc_stream = watches::watch(
        &client,
        &scope,
        Default::default(),
        writers.network_configurations,
        ignore,
    );
    // A restore in a holding step leaves its Machine's VM and disks alone (see `observe`).
    let restore_stream = restores_served.then(|| {
        let restores = writers.restores;
        watches::watch(&client, &scope, Default::default(), restores, ignore)
    });
    // Served with MachineRestores (the same CRDs): a snapshot's status reaches its Machine's.
    let snapshot_stream = restores_served.then(|| {
        let snapshots = writers.snapshots;
        watches::watch(&client, &scope, Default::default(), snapshots, ignore)
    });
    state.set_caches_synced(false);
    let (remote_tx, mut remote_rx) = tokio::sync::mpsc::unbounded_channel();
    let events = Publisher {
        client: clients.events.clone(),
        reporter: Reporter {
            controller: FIELD_MANAGER.to_owned(),
            instance: Some(settings.instance.clone()),
        },
    };
    // Under a key that replaced a lost one, each remote cluster's objects are re-proven first.
    let reproving = ownership_key.replaced().map(|_| Reproving {
        management: client.clone(),
        events: events.clone(),
    });
    let remotes = Arc::new(Remotes::new(
        settings.clusters.clone(),
        scope.clone(),
        stores.machines.clone(),
        bind_times.clone(),
        (ownership_key.without_history(), remote_tx, reproving),
    ));
    let ctx = Arc::new(Context {
        events,
        local: Arc::new(Cluster {
            name: None,
            identity: None,
            allow_cross_namespace_clones: false,
            client: client.clone(),
            stores: local_stores.clone(),
            written,
            apis,
            state: state.clone(),
            key: ownership_key.clone(),
            namespaces: Default::default(),
        }),
        client: client.clone(),
        settings: settings.clone(),
        stores,
        state,
        statuses,
        restores_served,
        caches_ready: watch::Sender::new(false),
        per_machine,
        bind_times,
        ownership_key,
        remotes: remotes.clone(),
    });
    let sweeper = tokio::spawn(remotes::sweep(remotes));
    // The names caches only fill sets; nothing is triggered by them.
    let names = tokio::spawn(local_streams.names);
    // Readiness on the leader waits for the caches, also when there is nothing to reconcile.
    let caches = {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let ready = ctx.caches_ready.clone();
            ctx.stores
                .clone()
                .track_readiness(
                    (local_stores, apis),
                    machines_listed,
                    ctx.state.clone(),
                    ready,
                    restores_served,
                )
                .await;
        })
    };
    let m1 = machines.clone();
    let by_network = move |nc: NetworkConfiguration| naming_network(&m1, &nc);
    let m2 = machines.clone();
    let by_attachment = move |nad: Packed<NetworkAttachmentDefinition>| naming_network(&m2, &nad);
    let m3 = machines.clone();
    let m4 = machines.clone();
    let by_storage_class = move |sc: StorageClass| {
        let name = sc.name_any();
        machines_using(&m3, None, |m| {
            m.storage_classes.iter().any(|sc| **sc == *name)
        })
    };

    tracing::info!(
        concurrency = settings.max_concurrent_reconciles,
        resync = ?settings.reconcile_interval,
        "starting the Machine controller"
    );
    let mut controller = Controller::for_stream(machine_stream, machines)
        .owns_stream(local_streams.vms)
        .owns_stream(local_streams.pvcs)
        .watches_stream(local_streams.vmis, vmi_machine)
        .watches_stream(nc_stream, by_network)
        .watches_stream(local_streams.storage_classes, by_storage_class);
    if let Some(nad_stream) = local_streams.nads {
        controller = controller.watches_stream(nad_stream, by_attachment);
    }
    if let Some(sp_stream) = local_streams.storage_profiles {
        // A profile is named like its StorageClass: the Machines on that class.
        let by_profile = move |sp: StorageProfile| {
            let name = sp.name_any();
            machines_using(&m4, None, |m| {
                m.storage_classes.iter().any(|sc| **sc == *name)
            })
        };
        controller = controller.watches_stream(sp_stream, by_profile);
    }
    if let Some(installs) = local_streams.kubevirts {
        // Drained so the cache fills; KubeVirt's configuration reaches Machines at their next
        // reconcile.
        controller = controller.watches_stream(installs, |_| None);
    }
    if let Some(restore_stream) = restore_stream {
        controller = controller.watches_stream(restore_stream, restored_machine);
    }
    if let Some(snapshot_stream) = snapshot_stream {
        let snapshotted =
            |s: MachineSnapshot| Some(ObjectRef::new(&s.spec.machine_name).within(&s.namespace()?));
        controller = controller.watches_stream(snapshot_stream, snapshotted);
    }
    if let Some(dv_stream) = local_streams.data_volumes {
        // By label, not owner: a retain-disks Machine's DataVolumes carry no owner reference.
        controller = controller.watches_stream(dv_stream, labelled_machine);
    }
    // What changes on remote clusters, and a remote cluster's readiness.
    let remote_triggers = futures::stream::poll_fn(move |cx| remote_rx.poll_recv(cx));
    controller
        .reconcile_on(paced)
        .reconcile_on(remote_triggers)
        .reconcile_on(local_streams.nodes)
        .trigger_backoff(EachWatchBacksOff)
        .with_config(controller::Config::default().concurrency(settings.max_concurrent_reconciles))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| {
            pacer.finished();
            async move {
                match result {
                    Ok(_) => {}
                    Err(controller::Error::ReconcilerFailed(..)) => {} // Logged by error_policy.
                    Err(controller::Error::ObjectNotFound(r)) => {
                        tracing::debug!(object = %r, "Machine gone before its reconcile");
                    }
                    Err(e) => tracing::warn!(error = %e, "watch or queue error"),
                }
            }
        })
        .await;
    caches.abort();
    names.abort();
    sweeper.abort();
    tracing::info!("Machine controller stopped");
}

/// The Machines in `obj`'s namespace whose spec names a network called like `obj` (a
/// NetworkConfiguration or its attachment).
fn naming_network<K: Resource>(
    machines: &Store<Packed<Machine>>,
    obj: &K,
) -> Vec<ObjectRef<Packed<Machine>>> {
    let name = obj.name_any();
    machines_using(machines, obj.namespace(), |m| {
        m.networks.iter().any(|n| **n == *name)
    })
}

/// The Machine an object's `vitistack.io/machine` label names (kept in its brief).
fn labelled_machine<K>(o: Packed<K>) -> Option<ObjectRef<Packed<Machine>>>
where
    K: Resource<DynamicType = ()> + Brief<Brief = Option<Box<str>>>,
{
    Some(ObjectRef::new(o.brief().as_deref()?).within(&o.namespace()?))
}

/// The Machine a VMI's `vitistack.io/machine` label names (kept in its brief).
fn vmi_machine(o: Packed<VirtualMachineInstance>) -> Option<ObjectRef<Packed<Machine>>> {
    Some(ObjectRef::new(o.brief().machine.as_deref()?).within(&o.namespace()?))
}

/// The Machine a MachineRestore names.
fn restored_machine(r: MachineRestore) -> Option<ObjectRef<Packed<Machine>>> {
    Some(ObjectRef::new(&r.spec.machine_name).within(&r.namespace()?))
}

/// The optional APIs the reconciler's own cluster serves, and whether MachineRestores are.
struct Discovered {
    cluster: Apis,
    restores: bool,
}

/// Asks discovery about each optional kind on its own (a kind not served is absent, with a
/// warning where Machines notice): readiness never waits on an optional API.
async fn discover(client: &Client) -> Discovered {
    let serves = |gv, plural| discovery::serves(client, gv, plural);
    let ((multus, cdi, storage_profiles), (restores, kubevirt_snapshots, kubevirt), installs) = futures::join!(
        futures::future::join3(
            serves("k8s.cni.cncf.io/v1", "network-attachment-definitions"),
            serves("cdi.kubevirt.io/v1beta1", "datavolumes"),
            serves("cdi.kubevirt.io/v1beta1", "storageprofiles"),
        ),
        futures::future::join3(
            serves("vitistack.io/v1alpha1", "machinerestores"),
            serves("snapshot.kubevirt.io/v1beta1", "virtualmachinesnapshots"),
            serves("kubevirt.io/v1", "virtualmachines"),
        ),
        serves("kubevirt.io/v1", "kubevirts"),
    );
    if !multus {
        tracing::warn!(
            "Multus (NetworkAttachmentDefinition, k8s.cni.cncf.io/v1) is not installed: Machines with networks wait (NetworkReady=False, MultusNotInstalled); restart the operator after installing it"
        );
    }
    if !cdi {
        tracing::warn!(
            "CDI (DataVolume, cdi.kubevirt.io/v1beta1) is not installed: Machines with disk sources or CD-ROMs wait (StorageReady=False, CDINotInstalled); restart the operator after installing it"
        );
    } else if !storage_profiles {
        tracing::warn!(
            "CDI's StorageProfile (cdi.kubevirt.io/v1beta1 storageprofiles) is not served: disks that name no access or volume mode take ReadWriteOnce and Filesystem; restart the operator after installing it"
        );
    }
    Discovered {
        cluster: Apis {
            kubevirt,
            multus,
            cdi,
            storage_profiles: cdi && storage_profiles,
            kubevirt_snapshots,
            kubevirt_installs: kubevirt
                && installs
                && discovery::may_list(client, "kubevirt.io/v1", "kubevirts").await,
        },
        restores,
    }
}
