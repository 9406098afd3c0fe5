//! The controller: watches, the reconcile loop and its error policy.
//!
//! Every watch feeds a cache (reflector) that the reconcile reads instead of the API, and
//! triggers the Machines it concerns: their own VMs and PVCs (by owner), VMIs (by the
//! `vitistack.io/machine` label KubeVirt copies from the VM template), and NetworkConfigurations,
//! NetworkAttachmentDefinitions and StorageClasses (by the Machines that name them). Machines are
//! also re-checked every `RECONCILE_INTERVAL`. Watch restarts, expired resource versions (410)
//! and API server outages are handled by each watcher's own backoff and re-list
//! (`tests/reconciler_restart.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::api::{Machine, MachineSpec, MachineStatus, NetworkConfiguration};
use crate::machine::validation::{validate, validate_name};
use crate::machine::{Catalog, DEFAULTS_ANNOTATION, resolve};

use super::desired::cloud_init::secret_source;
use super::desired::meta::derived_secret_name;
use super::desired::{self, Inputs, SecretData};
use super::error::{Error, api_message, is_not_found};
use super::kubevirt::{VirtualMachine, VirtualMachineInstance};
use super::last_write::LastWrite;
use super::metrics::{self as reconcile_metrics, BindTimes, CONTROLLER};
use super::multus::NetworkAttachmentDefinition;
use super::readiness::State;
use super::status::{self, ApiFailure, Observation, Reconciled, Target, reason};
use super::{FIELD_MANAGER, MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, apply, events, finalizer};
use crate::telemetry::Metrics;
use crate::telemetry::metrics::Controller as ControllerLabel;

/// How the reconciler runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Resync period of every Machine (`RECONCILE_INTERVAL`), also the cap of error backoff.
    pub reconcile_interval: Duration,
    /// Machines reconciled at once (`MAX_CONCURRENT_RECONCILES`).
    pub max_concurrent_reconciles: u16,
    pub catalog: Catalog,
    /// This replica's name in Events (and the Lease); the pod name in a cluster.
    pub instance: String,
    /// Where reconcile counts, durations and gauges go.
    pub metrics: Arc<Metrics>,
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

/// How long a reconcile waits for the caches before it works with what they hold.
const CACHE_WAIT: Duration = Duration::from_secs(10);
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The watch caches the reconcile reads.
#[derive(Clone)]
pub struct Stores {
    pub machines: Store<Machine>,
    pub vms: Store<VirtualMachine>,
    pub vmis: Store<VirtualMachineInstance>,
    pub pvcs: Store<PersistentVolumeClaim>,
    pub network_configurations: Store<NetworkConfiguration>,
    pub nads: Store<NetworkAttachmentDefinition>,
    pub storage_classes: Store<StorageClass>,
}

impl Stores {
    /// Waits for every cache's first list and then opens `ready` (and marks `state` synced).
    /// kube's `Store::wait_until_ready` wakes only one of several waiters (the last to poll), so
    /// each store has one caller: this task, except for the Machine store, whose caller is the
    /// `Controller` itself; its first list is reported through `machines_listed` instead.
    /// Reconciles wait on `ready`. A cache whose API is absent (KubeVirt or Multus not
    /// installed) never fills: after [`CACHE_WAIT`] the reconciles go on with what the caches
    /// hold, and writing to that API fails with a message in the Machine's status instead of
    /// hanging; `state` says synced only once every cache has filled.
    async fn track_readiness(
        self,
        mut machines_listed: watch::Receiver<bool>,
        state: Arc<State>,
        ready: watch::Sender<bool>,
    ) {
        let all = async {
            futures::try_join!(
                async {
                    machines_listed
                        .wait_for(|l| *l)
                        .await
                        .map(drop)
                        .map_err(drop)
                },
                async { self.vms.wait_until_ready().await.map_err(drop) },
                async { self.vmis.wait_until_ready().await.map_err(drop) },
                async { self.pvcs.wait_until_ready().await.map_err(drop) },
                async {
                    self.network_configurations
                        .wait_until_ready()
                        .await
                        .map_err(drop)
                },
                async { self.nads.wait_until_ready().await.map_err(drop) },
                async { self.storage_classes.wait_until_ready().await.map_err(drop) },
            )
            .map(drop)
        };
        tokio::pin!(all);
        match tokio::time::timeout(CACHE_WAIT, &mut all).await {
            Ok(Ok(())) => {
                state.set_caches_synced(true);
                ready.send_replace(true);
                return;
            }
            Ok(Err(_)) => return, // The controller is stopping.
            Err(_) => {
                tracing::warn!(
                    "some watch caches are not filled yet; reconciling with what they hold"
                );
                ready.send_replace(true);
            }
        }
        if all.await.is_ok() {
            state.set_caches_synced(true);
            tracing::info!("all watch caches filled");
        }
    }
}

pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub recorder: Recorder,
    pub stores: Stores,
    pub state: Arc<State>,
    pub written: Arc<Written>,
    /// Open once the caches are filled (or [`CACHE_WAIT`] passed); reconciles wait for it.
    caches_ready: watch::Sender<bool>,
    failures: Mutex<HashMap<ObjectRef<Machine>, u32>>,
    bind_times: BindTimes,
}

/// Our latest writes, standing in for the caches until they catch up (see [`LastWrite`]).
#[derive(Default)]
pub struct Written {
    pub statuses: LastWrite<MachineStatus>,
    pub vms: LastWrite<VirtualMachine>,
    pub pvcs: LastWrite<PersistentVolumeClaim>,
    pub nads: LastWrite<NetworkAttachmentDefinition>,
    pub secrets: LastWrite<Secret>,
}

impl Context {
    pub fn api_machines(&self, ns: &str) -> Api<Machine> {
        Api::namespaced(self.client.clone(), ns)
    }

    fn forget_failures(&self, machine: &Machine) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(&ObjectRef::from_obj(machine));
        }
    }

    /// 1s, 2s, 4s, ... up to the resync interval.
    fn next_retry(&self, machine: &Machine) -> Duration {
        let n = match self.failures.lock() {
            Ok(mut f) => {
                let n = f.entry(ObjectRef::from_obj(machine)).or_insert(0);
                *n = n.saturating_add(1);
                *n
            }
            Err(_) => 1,
        };
        let exp = FIRST_RETRY.saturating_mul(1u32 << (n - 1).min(16));
        exp.min(self.settings.reconcile_interval.max(FIRST_RETRY))
    }
}

/// Drops what the reconcile never reads, to keep the caches small.
fn slim<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}

/// A watch that fills `writer` and yields every object it sees change (including deletions),
/// telling `written` what it saw.
fn cached<K>(
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    written: impl Fn(&str, Option<&str>) + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    watcher(api, config)
        .default_backoff()
        .modify(slim::<K>)
        .reflect(writer)
        .touched_objects()
        .inspect(move |r| {
            if let Ok(o) = r {
                written(&key_of(o), o.meta().resource_version.as_deref());
            }
        })
}

fn key_of<K: Resource>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

fn ignore(_: &str, _: Option<&str>) {}

fn managed() -> watcher::Config {
    watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"))
}

/// Machines in `ns` for which `uses` holds.
fn machines_using(
    machines: &Store<Machine>,
    ns: Option<String>,
    uses: impl Fn(&Machine) -> bool,
) -> Vec<ObjectRef<Machine>> {
    machines
        .state_filter(|m| m.namespace() == ns && uses(m))
        .iter()
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

const GAUGE_REFRESH: Duration = Duration::from_secs(5);

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

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    clients: Clients,
    settings: Settings,
    state: Arc<State>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = clients.api.clone();
    let (machines, machines_w) = reflector::store::<Machine>();
    let (vms, vms_w) = reflector::store::<VirtualMachine>();
    let (vmis, vmis_w) = reflector::store::<VirtualMachineInstance>();
    let (pvcs, pvcs_w) = reflector::store::<PersistentVolumeClaim>();
    let (ncs, ncs_w) = reflector::store::<NetworkConfiguration>();
    let (nads, nads_w) = reflector::store::<NetworkAttachmentDefinition>();
    let (scs, scs_w) = reflector::store::<StorageClass>();

    let written = Arc::new(Written::default());
    let w = written.clone();
    let (machines_listed_tx, machines_listed) = watch::channel(false);
    let machine_stream = watcher(
        Api::<Machine>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(slim::<Machine>)
    .reflect(machines_w)
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
                .observed(&key_of(m), m.meta().resource_version.as_deref());
        }
    });
    let w = written.clone();
    let vm_stream = cached(
        Api::<VirtualMachine>::all(client.clone()),
        managed(),
        vms_w,
        move |k, v| w.vms.observed(k, v),
    );
    let w = written.clone();
    let pvc_stream = cached(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        managed(),
        pvcs_w,
        move |k, v| w.pvcs.observed(k, v),
    );
    let vmi_stream = cached(
        Api::<VirtualMachineInstance>::all(client.clone()),
        watcher::Config::default().labels(MACHINE_LABEL),
        vmis_w,
        ignore,
    );
    let nc_stream = cached(
        Api::<NetworkConfiguration>::all(client.clone()),
        watcher::Config::default(),
        ncs_w,
        ignore,
    );
    let w = written.clone();
    let nad_stream = cached(
        Api::<NetworkAttachmentDefinition>::all(client.clone()),
        managed(),
        nads_w,
        move |k, v| w.nads.observed(k, v),
    );
    let sc_stream = cached(
        Api::<StorageClass>::all(client.clone()),
        watcher::Config::default(),
        scs_w,
        ignore,
    );
    state.set_caches_synced(false);
    let ctx = Arc::new(Context {
        recorder: Recorder::new(
            clients.events.clone(),
            Reporter {
                controller: FIELD_MANAGER.to_owned(),
                instance: Some(settings.instance.clone()),
            },
        ),
        client,
        settings: settings.clone(),
        stores: Stores {
            machines: machines.clone(),
            vms,
            vmis,
            pvcs,
            network_configurations: ncs,
            nads,
            storage_classes: scs,
        },
        state,
        written,
        caches_ready: watch::Sender::new(false),
        failures: Mutex::new(HashMap::new()),
        bind_times: BindTimes::default(),
    });
    // Readiness on the leader waits for the caches, also when there is nothing to reconcile.
    let caches = {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let ready = ctx.caches_ready.clone();
            ctx.stores
                .clone()
                .track_readiness(machines_listed, ctx.state.clone(), ready)
                .await;
        })
    };
    // Gauges are recounted from the caches on a timer, not per reconcile (which would make a
    // resync of N Machines cost N² reads).
    let gauges = {
        let (machines, vms) = (ctx.stores.machines.clone(), ctx.stores.vms.clone());
        let (metrics, catalog) = (settings.metrics.clone(), settings.catalog.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(GAUGE_REFRESH);
            loop {
                tick.tick().await;
                reconcile_metrics::refresh_gauges(&metrics, &machines, &vms, &catalog);
            }
        })
    };

    let by_label = |vmi: VirtualMachineInstance| {
        let machine = vmi.labels().get(MACHINE_LABEL).cloned();
        let ns = vmi.namespace();
        machine.map(|m| {
            let r = ObjectRef::new(&m);
            match ns {
                Some(ns) => r.within(&ns),
                None => r,
            }
        })
    };
    let m1 = machines.clone();
    let by_network = move |nc: NetworkConfiguration| {
        let name = nc.name_any();
        machines_using(&m1, nc.namespace(), |m| {
            m.spec.networks.iter().any(|n| n.network_name == name)
        })
    };
    let m2 = machines.clone();
    let by_attachment = move |nad: NetworkAttachmentDefinition| {
        let name = nad.name_any();
        machines_using(&m2, nad.namespace(), |m| {
            m.spec.networks.iter().any(|n| n.network_name == name)
        })
    };
    let m3 = machines.clone();
    let by_storage_class = move |sc: StorageClass| {
        let name = sc.name_any();
        m3.state_filter(|m| {
            m.spec
                .disks
                .iter()
                .any(|d| d.storage_class.as_deref() == Some(name.as_str()))
        })
        .iter()
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect::<Vec<_>>()
    };

    tracing::info!(
        concurrency = settings.max_concurrent_reconciles,
        resync = ?settings.reconcile_interval,
        "starting the Machine controller"
    );
    Controller::for_stream(machine_stream, machines)
        .owns_stream(vm_stream)
        .owns_stream(pvc_stream)
        .watches_stream(vmi_stream, by_label)
        .watches_stream(nc_stream, by_network)
        .watches_stream(nad_stream, by_attachment)
        .watches_stream(sc_stream, by_storage_class)
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
    gauges.abort();
    caches.abort();
    tracing::info!("Machine controller stopped");
}

fn error_policy(machine: Arc<Machine>, error: &Error, ctx: Arc<Context>) -> Action {
    let retry = ctx.next_retry(&machine);
    let level_is_info = matches!(error, Error::Blocked(_) | Error::VmiStillRunning(_));
    if level_is_info {
        tracing::info!(machine = %machine.name_any(), namespace = machine.namespace().unwrap_or_default(), error = %error, retry_in = ?retry, "reconcile incomplete");
    } else {
        tracing::warn!(machine = %machine.name_any(), namespace = machine.namespace().unwrap_or_default(), error = %error, kind = error.kind(), retry_in = ?retry, "reconcile failed");
    }
    Action::requeue(retry)
}

/// The spec the reconciler works from: resolved like the webhook would, so a Machine that
/// bypassed admission is treated the same as one that went through it.
pub fn resolved_spec(machine: &Machine, catalog: &Catalog) -> MachineSpec {
    let recorded = machine
        .annotations()
        .get(DEFAULTS_ANNOTATION)
        .and_then(|s| serde_json::from_str::<MachineSpec>(s).ok());
    resolve(&machine.spec, recorded.as_ref(), catalog).spec
}

async fn reconcile(machine: Arc<Machine>, ctx: Arc<Context>) -> Result<Action, Error> {
    if ctx.caches_ready.subscribe().wait_for(|r| *r).await.is_err() {
        return Err(Error::CachesGone);
    }
    // The object handed over was taken from the cache when the run was requested, possibly
    // while the previous run was still writing; the cache may hold a newer copy by now.
    let machine = ctx
        .stores
        .machines
        .get(&ObjectRef::from_obj(machine.as_ref()))
        .unwrap_or(machine);
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
        Ok(_) => ctx.forget_failures(&machine),
        // User-fixable problems are counted by reason where they are found.
        Err(Error::Blocked(_)) => {}
        Err(e) => reconcile_metrics::record_error(metrics, e.kind()),
    }
    result
}

async fn reconcile_machine(machine: &Machine, ctx: &Context) -> Result<Action, Error> {
    let ns = machine.namespace().ok_or(Error::NoNamespace)?;
    let name = machine.name_any();
    let catalog = &ctx.settings.catalog;
    let spec = resolved_spec(machine, catalog);
    if machine.meta().deletion_timestamp.is_some() {
        return finalizer::cleanup(machine, &spec, ctx).await;
    }
    let machines = ctx.api_machines(&ns);

    let mut outcome = validate(&spec, catalog);
    outcome.errors.extend(validate_name(&name));
    if !outcome.errors.is_empty() {
        // It bypassed admission: report, create nothing, and wait for the user to fix it.
        let template_error = outcome
            .errors
            .iter()
            .any(|e| e.to_string().starts_with("spec.template:"));
        let reason = if template_error {
            reason::TEMPLATE_NOT_FOUND
        } else {
            reason::INVALID_SPEC
        };
        let message = outcome
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let observation = Observation::Invalid { reason, message };
        update_status(machine, &machines, &observation, ctx).await?;
        return Ok(Action::requeue(ctx.settings.reconcile_interval));
    }

    finalizer::ensure(&machines, machine).await?;

    // Observe the dependencies.
    let network_configurations: BTreeMap<String, NetworkConfiguration> = spec
        .networks
        .iter()
        .filter_map(|n| {
            ctx.stores
                .network_configurations
                .get(&ObjectRef::new(&n.network_name).within(&ns))
                .map(|nc| (n.network_name.clone(), nc.as_ref().clone()))
        })
        .collect();
    let storage_classes: BTreeSet<String> = spec
        .disks
        .iter()
        .filter_map(|d| d.storage_class.clone())
        .filter(|sc| {
            ctx.stores
                .storage_classes
                .get(&ObjectRef::new(sc))
                .is_some()
        })
        .collect();
    // Secrets are read one at a time, in the Machine's own namespace only, and never cached.
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let source_secret = match secret_source(spec.cloud_init.as_ref()) {
        Some((secret_name, _)) => secrets.get_opt(secret_name).await?,
        None => None,
    };
    let cloud_init_secret =
        secret_source(spec.cloud_init.as_ref()).map(|(_, key)| match source_secret.as_ref() {
            None => SecretData::Missing,
            Some(s) => s
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .map_or(SecretData::KeyMissing, |b| SecretData::Present(&b.0)),
        });

    let desired = desired::derive(&Inputs {
        machine,
        spec: &spec,
        network_configurations: &network_configurations,
        storage_classes: &storage_classes,
        cloud_init_secret,
    });
    drop(source_secret);
    reconcile_metrics::record_problems(&ctx.settings.metrics, &desired.problems);

    // Claims, attachments and the VM (after its derived Secret) are written concurrently: the
    // VM refers to its claims by name, and KubeVirt waits for claims that are not there yet.
    let ns_ref: &str = &ns;
    let claims_written = async {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), ns_ref);
        let writes = desired.pvcs.into_iter().map(|pvc| {
            let api = api.clone();
            async move {
                let claim_name = pvc.name_any();
                let live = ctx
                    .stores
                    .pvcs
                    .get(&ObjectRef::new(&claim_name).within(ns_ref))
                    .map(|p| p.as_ref().clone());
                match apply::ensure(&api, pvc, live.clone(), &ctx.written.pvcs).await {
                    Ok(p) => {
                        ctx.bind_times
                            .observe(&ctx.settings.metrics, &p, Timestamp::now());
                        ((claim_name, Some(p)), None)
                    }
                    Err(e) => {
                        let failure = failure(Target::Pvc(claim_name.clone()), &e);
                        ((claim_name, live), Some(failure))
                    }
                }
            }
        });
        let (claims, failures): (Vec<_>, Vec<_>) =
            futures::future::join_all(writes).await.into_iter().unzip();
        (claims, failures.into_iter().flatten().collect::<Vec<_>>())
    };
    let attachments_written = async {
        let writes = desired.attachments.into_iter().map(|nad| async move {
            let nad_ns = nad.namespace().unwrap_or_else(|| ns_ref.to_owned());
            let nad_name = nad.name_any();
            let api: Api<NetworkAttachmentDefinition> =
                Api::namespaced(ctx.client.clone(), &nad_ns);
            let live = ctx
                .stores
                .nads
                .get(&ObjectRef::new(&nad_name).within(&nad_ns))
                .map(|n| n.as_ref().clone());
            apply::ensure(&api, nad, live, &ctx.written.nads)
                .await
                .err()
                .map(|e| failure(Target::Attachment(nad_name), &e))
        });
        futures::future::join_all(writes)
            .await
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
    };
    let vm_written = write_vm(ctx, &ns, &name, &secrets, desired.secret, desired.vm);
    let ((claims, claim_failures), attachment_failures, vm_result) =
        futures::join!(claims_written, attachments_written, vm_written);
    let (vm, vm_failures) = vm_result?;
    let failures: Vec<ApiFailure> = claim_failures
        .into_iter()
        .chain(attachment_failures)
        .chain(vm_failures)
        .collect();

    let vmi = ctx
        .stores
        .vmis
        .get(&ObjectRef::new(&name).within(&ns))
        .map(|v| v.as_ref().clone());
    let claim_refs: Vec<(String, Option<&PersistentVolumeClaim>)> = claims
        .iter()
        .map(|(n, p)| (n.clone(), p.as_ref()))
        .collect();
    let blocked = !desired.problems.is_empty() || !failures.is_empty();
    let summary = blocked.then(|| {
        let mut parts: Vec<String> = desired.problems.iter().map(ToString::to_string).collect();
        parts.extend(failures.iter().map(|f| f.message.clone()));
        parts.join("; ")
    });
    let observation = Observation::Reconciled(Reconciled {
        running: spec.running.unwrap_or(true),
        problems: &desired.problems,
        failures: &failures,
        vm: vm.as_ref(),
        vmi: vmi.as_ref(),
        claims: claim_refs,
        networks: spec.networks.len(),
    });
    update_status(machine, &machines, &observation, ctx).await?;

    match summary {
        Some(s) => Err(Error::Blocked(s)),
        None => Ok(Action::requeue(ctx.settings.reconcile_interval)),
    }
}

fn failure(target: Target, e: &kube::Error) -> ApiFailure {
    ApiFailure {
        target,
        message: api_message(e),
    }
}

/// The derived cloud-init Secret (read from the API: Secrets are not cached), then the VM once
/// everything it points at exists. Returns the VM as it now is, and what failed.
async fn write_vm(
    ctx: &Context,
    ns: &str,
    name: &str,
    secrets: &Api<Secret>,
    secret: Option<Secret>,
    desired_vm: Option<VirtualMachine>,
) -> Result<(Option<VirtualMachine>, Vec<ApiFailure>), Error> {
    let mut failures = Vec::new();
    let derived_name = derived_secret_name(name);
    let mut secret_ok = true;
    if let Some(secret) = secret {
        let live = secrets.get_opt(&derived_name).await?;
        let foreign = live.as_ref().is_some_and(|s| {
            s.labels().get(MACHINE_LABEL).map(String::as_str) != Some(name)
                || s.labels().get(MANAGED_BY_LABEL).map(String::as_str) != Some(MANAGED_BY)
        });
        if foreign {
            secret_ok = false;
            failures.push(ApiFailure {
                target: Target::Secret(derived_name.clone()),
                message: format!(
                    "Secret {derived_name:?} exists and is not managed by {MANAGED_BY}; rename it or use the key \"userdata\""
                ),
            });
        } else if let Err(e) = apply::ensure(secrets, secret, live, &ctx.written.secrets).await {
            secret_ok = false;
            failures.push(failure(Target::Secret(derived_name.clone()), &e));
        }
    }

    let vms: Api<VirtualMachine> = Api::namespaced(ctx.client.clone(), ns);
    let live_vm = ctx
        .stores
        .vms
        .get(&ObjectRef::new(name).within(ns))
        .map(|v| v.as_ref().clone());
    let used_derived_secret = live_vm
        .as_ref()
        .is_some_and(|vm| references_secret(vm, &derived_name));
    let vm = match desired_vm {
        Some(vm) if secret_ok => {
            match apply::ensure(&vms, vm, live_vm.clone(), &ctx.written.vms).await {
                Ok(vm) => {
                    // A derived Secret the VM no longer uses goes once the VM stops naming it.
                    if used_derived_secret && !references_secret(&vm, &derived_name) {
                        delete_derived_secret(secrets, &derived_name, name).await?;
                    }
                    Some(vm)
                }
                Err(e) => {
                    failures.push(failure(Target::VirtualMachine(name.to_owned()), &e));
                    live_vm
                }
            }
        }
        _ => live_vm,
    };
    Ok((vm, failures))
}

fn references_secret(vm: &VirtualMachine, secret: &str) -> bool {
    vm.spec.template.spec.volumes.iter().any(|v| {
        v.cloud_init_no_cloud
            .as_ref()
            .and_then(|c| c.user_data_secret_ref.as_ref())
            .is_some_and(|r| r.name == secret)
    })
}

async fn delete_derived_secret(api: &Api<Secret>, name: &str, machine: &str) -> Result<(), Error> {
    if let Some(s) = api.get_metadata_opt(name).await?
        && s.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MACHINE_LABEL))
            .map(String::as_str)
            == Some(machine)
    {
        match api.delete(name, &Default::default()).await {
            Err(e) if !is_not_found(&e) => return Err(e.into()),
            _ => tracing::info!(
                machine,
                secret = name,
                "deleted the derived cloud-init Secret"
            ),
        }
    }
    Ok(())
}

/// Phase and condition reasons, for debug logs.
fn summary(s: &MachineStatus) -> String {
    let conditions: Vec<String> = s
        .conditions
        .iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect();
    format!(
        "{} vm={:?} vmi={:?} gen={:?} [{}]",
        s.phase.as_deref().unwrap_or("-"),
        s.vm_name,
        s.vmi_name,
        s.observed_generation,
        conditions.join(" ")
    )
}

/// Computes the status; writes it and publishes Events only when it changed.
async fn update_status(
    machine: &Machine,
    api: &Api<Machine>,
    observation: &Observation<'_>,
    ctx: &Context,
) -> Result<(), Error> {
    let key = format!(
        "{}/{}",
        machine.namespace().unwrap_or_default(),
        machine.name_any()
    );
    let ours = ctx
        .written
        .statuses
        .newer_than(&key, machine.resource_version().as_deref());
    let old = ours.as_ref().or(machine.status.as_ref());
    let new = status::compute(
        old,
        machine.metadata.generation,
        observation,
        Timestamp::now(),
    );
    if !status::differs(old, &new) {
        return Ok(());
    }
    tracing::debug!(
        machine = %machine.name_any(),
        namespace = machine.namespace().unwrap_or_default(),
        cached_version = machine.resource_version().unwrap_or_default(),
        cached_has_status = machine.status.is_some(),
        from_own_write = ours.is_some(),
        old = ?old.map(summary),
        new = ?summary(&new),
        "status changed"
    );
    let version = apply::write_status(api, &machine.name_any(), &new).await?;
    ctx.written
        .statuses
        .record(key, version.as_deref(), new.clone());
    tracing::info!(
        machine = %machine.name_any(),
        namespace = machine.namespace().unwrap_or_default(),
        phase = new.phase.as_deref().unwrap_or_default(),
        resource_version = version.as_deref().unwrap_or_default(),
        "status updated"
    );
    // Published in the background: an Event never holds up the next Machine.
    let notices = events::notices(old, &new);
    if !notices.is_empty() {
        let recorder = ctx.recorder.clone();
        let machine = machine.clone();
        tokio::spawn(async move { events::publish(&recorder, &machine, notices).await });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube's `Store::wait_until_ready` wakes only the last of several waiters. The Controller
    /// waits on the Machine store itself; readiness must not be a second waiter there, or
    /// every reconcile stalls for `CACHE_WAIT` at start-up when the Controller polls last.
    #[tokio::test]
    async fn caches_open_while_the_controller_waits_on_the_machine_store() {
        let (machines, mut machines_w) = reflector::store::<Machine>();
        let (vms, mut vms_w) = reflector::store::<VirtualMachine>();
        let (vmis, mut vmis_w) = reflector::store::<VirtualMachineInstance>();
        let (pvcs, mut pvcs_w) = reflector::store::<PersistentVolumeClaim>();
        let (ncs, mut ncs_w) = reflector::store::<NetworkConfiguration>();
        let (nads, mut nads_w) = reflector::store::<NetworkAttachmentDefinition>();
        let (scs, mut scs_w) = reflector::store::<StorageClass>();
        let stores = Stores {
            machines: machines.clone(),
            vms,
            vmis,
            pvcs,
            network_configurations: ncs,
            nads,
            storage_classes: scs,
        };
        let (listed_tx, listed) = watch::channel(false);
        let (ready_tx, mut ready) = watch::channel(false);
        let state = Arc::new(State::default());
        let tracker = tokio::spawn(stores.track_readiness(listed, state.clone(), ready_tx));
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The Controller's own wait, polled after the tracker's.
        let controller = tokio::spawn(async move { machines.wait_until_ready().await });
        tokio::time::sleep(Duration::from_millis(20)).await;

        vms_w.apply_watcher_event(&watcher::Event::InitDone);
        vmis_w.apply_watcher_event(&watcher::Event::InitDone);
        pvcs_w.apply_watcher_event(&watcher::Event::InitDone);
        ncs_w.apply_watcher_event(&watcher::Event::InitDone);
        nads_w.apply_watcher_event(&watcher::Event::InitDone);
        scs_w.apply_watcher_event(&watcher::Event::InitDone);
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The Machine list, the largest, completes last: nothing else wakes the tracker.
        machines_w.apply_watcher_event(&watcher::Event::InitDone);
        listed_tx.send_replace(true); // as the Machine stream reports it

        let soon = Duration::from_secs(2);
        assert!(soon < CACHE_WAIT);
        tokio::time::timeout(soon, ready.wait_for(|r| *r))
            .await
            .expect("reconciles released well before CACHE_WAIT")
            .expect("ready channel open");
        tokio::time::timeout(soon, controller)
            .await
            .expect("the Controller's wait is woken too")
            .expect("task")
            .expect("store ready");
        tokio::time::timeout(soon, tracker)
            .await
            .expect("tracker finished")
            .expect("task");
        assert!(state.caches_synced());
    }
}
