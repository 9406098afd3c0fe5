//! The controller: the watches feeding the caches, what triggers a Machine, and the loop that
//! runs observe -> decide -> act for it (see `observe`, `decide`, `act`), inside a span that puts
//! SPEC's log fields (`controller`, `machine`, `namespace`, `phase`) on every line.
//!
//! Triggers: a Machine's own VMs and PVCs (by owner), VMIs (by the `vitistack.io/machine` label
//! KubeVirt copies from the VM template), and NetworkConfigurations,
//! NetworkAttachmentDefinitions and StorageClasses (by the Machines that name them), CDI
//! DataVolumes (by that label, when CDI is installed); every
//! Machine also every `RECONCILE_INTERVAL`. Watch restarts, expired resource versions (410) and
//! API server outages are handled by each watcher's own backoff and re-list
//! (`tests/reconciler_restart.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use tokio::sync::watch;
use tracing::Instrument;

use crate::api::{Machine, NetworkConfiguration};
use crate::telemetry::metrics::Controller as ControllerLabel;

pub use super::context::{Clients, Context, Settings, Stores, Writers, Written};
use super::metrics::{self as reconcile_metrics, BindTimes, CONTROLLER};
use super::readiness::State;
use super::watches::{self, Scope, ignore, machines_using, managed};
use crate::reconciler::act::events::Publisher;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::error::Error;
use crate::reconciler::store::packed::{Brief, Packed};
use crate::reconciler::{FIELD_MANAGER, MACHINE_LABEL, act, act::finalizer, decide, observe};

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
    (stores, writers): (Stores, Writers),
    state: Arc<State>,
    ownership_key: OwnershipKey,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = clients.api.clone();
    let multus_installed = watches::serves(
        &client,
        "k8s.cni.cncf.io/v1",
        "network-attachment-definitions",
    )
    .await;
    if !multus_installed {
        tracing::warn!(
            "Multus (NetworkAttachmentDefinition, k8s.cni.cncf.io/v1) is not installed: Machines with networks wait (NetworkReady=False, MultusNotInstalled); restart the operator after installing it"
        );
    }
    let cdi_installed = watches::serves(&client, "cdi.kubevirt.io/v1beta1", "datavolumes").await;
    if !cdi_installed {
        tracing::warn!(
            "CDI (DataVolume, cdi.kubevirt.io/v1beta1) is not installed: Machines with disk sources or CD-ROMs wait (StorageReady=False, CDINotInstalled); restart the operator after installing it"
        );
    }
    let machines = stores.machines.clone();

    let written = Arc::new(Written::default());
    let w = written.clone();
    let (machines_listed_tx, machines_listed) = watch::channel(false);
    let machine_stream = watches::packed_events::<Machine>(&client, &scope, Default::default())
        .reflect(writers.machines)
        .inspect(move |e| {
            // After `reflect`: the store holds the list by the time this is seen.
            if matches!(e, Ok(watcher::Event::InitDone)) {
                machines_listed_tx.send_replace(true);
            }
        })
        .applied_objects()
        .inspect(move |r| {
            if let Ok(m) = r {
                w.statuses
                    .observed(&watches::key_of(m), m.meta().resource_version.as_deref());
            }
        });
    let w = written.clone();
    let vm_stream = watches::watch_packed(&client, &scope, managed(), writers.vms, move |k, v| {
        w.vms.observed(k, v)
    });
    let w = written.clone();
    let pvc_stream =
        watches::watch_packed(&client, &scope, managed(), writers.pvcs, move |k, v| {
            w.pvcs.observed(k, v)
        });
    let vmi_config = watcher::Config::default().labels(MACHINE_LABEL);
    let vmi_stream = watches::watch_packed(&client, &scope, vmi_config, writers.vmis, ignore);
    let nc_stream = watches::watch(
        &client,
        &scope,
        Default::default(),
        writers.network_configurations,
        ignore,
    );
    let w = written.clone();
    let nad_stream = multus_installed.then(|| {
        watches::watch_packed(&client, &scope, managed(), writers.nads, move |k, v| {
            w.nads.observed(k, v)
        })
    });
    let w = written.clone();
    let dv_stream = cdi_installed.then(|| {
        watches::watch_packed(
            &client,
            &scope,
            managed(),
            writers.data_volumes,
            move |k, v| w.data_volumes.observed(k, v),
        )
    });
    let sc_stream = watches::watch(
        &client,
        &scope,
        Default::default(),
        writers.storage_classes,
        ignore,
    );
    state.set_caches_synced(false);
    let ctx = Arc::new(Context {
        events: Publisher {
            client: clients.events.clone(),
            reporter: Reporter {
                controller: FIELD_MANAGER.to_owned(),
                instance: Some(settings.instance.clone()),
            },
        },
        client,
        settings: settings.clone(),
        stores,
        state,
        written,
        multus_installed,
        cdi_installed,
        caches_ready: watch::Sender::new(false),
        failures: Mutex::new(HashMap::new()),
        bind_times: BindTimes::default(),
        ownership_key,
    });
    // The names caches only fill sets; nothing is triggered by them.
    let names = {
        let s = &ctx.stores;
        let vm = watches::names::<VirtualMachine>(&ctx.client, &scope, s.vm_names.clone());
        let pvc = watches::names::<PersistentVolumeClaim>(&ctx.client, &scope, s.pvc_names.clone());
        let nad = multus_installed.then(|| {
            watches::names::<NetworkAttachmentDefinition>(&ctx.client, &scope, s.nad_names.clone())
        });
        let dv = cdi_installed
            .then(|| watches::names::<DataVolume>(&ctx.client, &scope, s.dv_names.clone()));
        tokio::spawn(async move {
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
        })
    };
    // Readiness on the leader waits for the caches, also when there is nothing to reconcile.
    let caches = {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let ready = ctx.caches_ready.clone();
            ctx.stores
                .clone()
                .track_readiness(
                    machines_listed,
                    ctx.state.clone(),
                    ready,
                    multus_installed,
                    cdi_installed,
                )
                .await;
        })
    };
    let m1 = machines.clone();
    let by_network = move |nc: NetworkConfiguration| naming_network(&m1, &nc);
    let m2 = machines.clone();
    let by_attachment = move |nad: Packed<NetworkAttachmentDefinition>| naming_network(&m2, &nad);
    let m3 = machines.clone();
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
        .owns_stream(vm_stream)
        .owns_stream(pvc_stream)
        .watches_stream(vmi_stream, labelled_machine)
        .watches_stream(nc_stream, by_network)
        .watches_stream(sc_stream, by_storage_class);
    if let Some(nad_stream) = nad_stream {
        controller = controller.watches_stream(nad_stream, by_attachment);
    }
    if let Some(dv_stream) = dv_stream {
        // By label, not owner: a retain-disks Machine's DataVolumes carry no owner reference.
        controller = controller.watches_stream(dv_stream, labelled_machine);
    }
    controller
        .trigger_backoff(EachWatchBacksOff)
        .with_config(controller::Config::default().concurrency(settings.max_concurrent_reconciles))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok(_) => {}
                Err(controller::Error::ReconcilerFailed(..)) => {} // Logged by error_policy.
                Err(controller::Error::ObjectNotFound(r)) => {
                    tracing::debug!(object = %r, "Machine gone before its reconcile");
                }
                Err(e) => tracing::warn!(error = %e, "watch or queue error"),
            }
        })
        .await;
    caches.abort();
    names.abort();
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

/// Only failures the user cannot fix reach here (API errors, a VMI still going); a blocked
/// Machine is requeued by `reconcile` itself, with the same backoff.
fn error_policy(machine: Arc<Packed<Machine>>, error: &Error, ctx: Arc<Context>) -> Action {
    let retry = ctx.next_retry(machine.as_ref());
    let span = reconcile_span(&machine);
    let _guard = span.enter();
    if matches!(error, Error::VmiStillRunning(_)) {
        tracing::info!(error = %error, retry_in = ?retry, "reconcile incomplete");
    } else {
        tracing::warn!(error = %error, kind = error.kind(), retry_in = ?retry, "reconcile failed");
    }
    Action::requeue(retry)
}

/// SPEC's fields on every log line of a reconcile; `phase` is filled in once known.
fn reconcile_span(machine: &Packed<Machine>) -> tracing::Span {
    let phase = machine
        .brief()
        .phase
        .as_deref()
        .unwrap_or(crate::reconciler::decide::status::phase::PENDING);
    tracing::info_span!(
        "reconcile",
        controller = CONTROLLER,
        machine = %machine.name_any(),
        namespace = %machine.namespace().unwrap_or_default(),
        phase = %phase,
    )
}

async fn reconcile(machine: Arc<Packed<Machine>>, ctx: Arc<Context>) -> Result<Action, Error> {
    let span = reconcile_span(&machine);
    reconcile_in_span(machine, ctx).instrument(span).await
}

async fn reconcile_in_span(
    packed: Arc<Packed<Machine>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    if ctx.caches_ready.subscribe().wait_for(|r| *r).await.is_err() {
        return Err(Error::CachesGone);
    }
    // The object handed over was taken from the cache when the run was requested, possibly
    // while the previous run was still writing; the cache may hold a newer copy by now.
    let packed = ctx
        .stores
        .machines
        .get(&ObjectRef::from_obj(packed.as_ref()))
        .unwrap_or(packed);
    let machine = match packed.unpack() {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "cached Machine does not decode; reading it from the API server");
            let ns = packed.namespace().unwrap_or_default();
            match Api::<Machine>::namespaced(ctx.client.clone(), &ns)
                .get_opt(&packed.name_any())
                .await?
            {
                Some(m) => m,
                None => return Ok(Action::await_change()),
            }
        }
    };
    let started = std::time::Instant::now();
    let result = reconcile_machine(&machine, &ctx).await;
    let metrics = &ctx.settings.metrics;
    metrics
        .reconcile_duration
        .get_or_create(&ControllerLabel {
            controller: CONTROLLER.to_owned(),
        })
        .observe(started.elapsed().as_secs_f64());
    match &result {
        Ok(Reconciled::Done) => ctx.forget_failures(&machine),
        Ok(Reconciled::Blocked) => {}
        Err(e) => reconcile_metrics::record_error(metrics, e.kind()),
    }
    result.map(|r| match r {
        Reconciled::Done => Action::requeue(ctx.settings.reconcile_interval),
        // Problems are counted, shown and announced by reason in `act`; retry with backoff.
        Reconciled::Blocked => Action::requeue(ctx.next_retry(&machine)),
    })
}

enum Reconciled {
    Done,
    Blocked,
}

async fn reconcile_machine(machine: &Machine, ctx: &Context) -> Result<Reconciled, Error> {
    if machine.namespace().is_none() {
        return Err(Error::NoNamespace);
    }
    if machine.meta().deletion_timestamp.is_some() {
        return finalizer::cleanup(machine, ctx)
            .await
            .map(|()| Reconciled::Done);
    }
    let observed = observe::observe(machine, ctx).await?;
    let decision = decide::decide(&observed, &ctx.settings.catalog, &ctx.ownership_key);
    let (status, blocked) = act::act(ctx, &observed, decision).await?;
    if let Some(phase) = status.phase.as_deref() {
        tracing::Span::current().record("phase", phase);
    }
    tracing::debug!(blocked, "reconciled");
    Ok(if blocked {
        Reconciled::Blocked
    } else {
        Reconciled::Done
    })
}
