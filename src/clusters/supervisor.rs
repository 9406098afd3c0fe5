//! One KubevirtConfig's loop (I/O): watch the one Secret it names (a field selector, so nothing
//! else is cached), and at each change of it and every probe interval observe -> decide -> act:
//! the registry entry, and the status when it changed.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::time::MissedTickBehavior;

use super::context::Context;
use super::decide::{self, Observation, Probe, REFRESH_LAST_CHECKED, identity};
use super::kubeconfig;
use super::probe;
use super::registry::{Connection, Health};
use crate::api::kubevirt_config::{KubevirtConfig, KubevirtConfigStatus};
use crate::api::names::{ACKNOWLEDGE_CLUSTER_ANNOTATION, FIELD_MANAGER};

/// What the Secret watch has shown so far.
enum Seen {
    /// Not listed yet: nothing is decided (a restart must not flash SecretNotFound).
    Unknown,
    Missing,
    Forbidden(String),
    Present(Box<Secret>),
}

/// The client built from the current kubeconfig, kept while its revision stays.
struct Built {
    revision: String,
    client: Client,
    server: String,
}

pub(super) struct Supervisor {
    ctx: Arc<Context>,
    config: KubevirtConfig,
    name: String,
    seen: Seen,
    built: Option<Built>,
    /// The last connection found ready: reused while nothing changes (readers compare by
    /// pointer), and handed to readers while the cluster is not ready.
    last: Option<Arc<Connection>>,
    written: Option<KubevirtConfigStatus>,
}

impl Supervisor {
    pub(super) fn new(ctx: Arc<Context>, config: KubevirtConfig) -> Self {
        let name = config.name_any();
        let last = ctx.registry.get(&name).and_then(|h| match h {
            Health::Ready(c) => Some(c),
            Health::NotReady { last, .. } => last,
        });
        Supervisor {
            written: config.status.clone(),
            ctx,
            config,
            name,
            seen: Seen::Unknown,
            built: None,
            last,
        }
    }

    /// Runs until aborted (the controller aborts it when the config changes or goes).
    pub(super) async fn run(mut self) {
        let spec = &self.config.spec;
        let api: Api<Secret> = Api::namespaced(self.ctx.client.clone(), &spec.secret_namespace);
        let selector = format!("metadata.name={}", spec.kubeconfig_secret_ref);
        let mut events = watcher(api, watcher::Config::default().fields(&selector))
            .default_backoff()
            .boxed();
        let mut ticks = tokio::time::interval(self.ctx.settings.probe_interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut pending: Option<Secret> = None;
        loop {
            tokio::select! {
                event = events.next() => {
                    let Some(event) = event else { return };
                    if self.on_event(event, &mut pending) {
                        self.look().await;
                        ticks.reset();
                    }
                }
                _ = ticks.tick() => self.look().await,
            }
        }
    }

    /// Follows the Secret; true when what it shows changed.
    fn on_event(
        &mut self,
        event: Result<watcher::Event<Secret>, watcher::Error>,
        pending: &mut Option<Secret>,
    ) -> bool {
        let next = match event {
            Ok(watcher::Event::Init) => {
                *pending = None;
                return false;
            }
            Ok(watcher::Event::InitApply(s)) => {
                *pending = Some(s);
                return false;
            }
            Ok(watcher::Event::InitDone) => match pending.take() {
                Some(s) => Seen::Present(Box::new(s)),
                None => Seen::Missing,
            },
            Ok(watcher::Event::Apply(s)) => Seen::Present(Box::new(s)),
            Ok(watcher::Event::Delete(_)) => Seen::Missing,
            Err(e) => {
                let forbidden = matches!(&e,
                    watcher::Error::InitialListFailed(kube::Error::Api(s))
                    | watcher::Error::WatchStartFailed(kube::Error::Api(s))
                    if s.code == 403);
                if !forbidden {
                    tracing::warn!(config = %self.name, error = %e, "watching the kubeconfig Secret failed; retrying");
                    return false;
                }
                Seen::Forbidden(e.to_string())
            }
        };
        let same = match (&self.seen, &next) {
            (Seen::Missing, Seen::Missing) => true,
            (Seen::Forbidden(a), Seen::Forbidden(b)) => a == b,
            (Seen::Present(a), Seen::Present(b)) => a.resource_version() == b.resource_version(),
            _ => false,
        };
        self.seen = next;
        !same
    }

    /// Observe, decide, act.
    async fn look(&mut self) {
        let Some(observation) = self.observe().await else {
            return;
        };
        let acknowledged = (self.config.annotations())
            .get(ACKNOWLEDGE_CLUSTER_ANNOTATION)
            .cloned();
        let found = match &observation {
            Observation::Probed(Probe::Reached { identity, .. }) => Some(identity.clone()),
            _ => None,
        };
        let verdict = match &found {
            Some(found) => identity::checked(
                decide::verdict(&observation),
                &self.name,
                found,
                self.written
                    .as_ref()
                    .and_then(|s| s.cluster_identity.as_deref()),
                acknowledged.as_deref(),
            ),
            None => decide::verdict(&observation),
        };
        let health = match (&verdict.apis, &self.built, found) {
            (Some(apis), Some(built), Some(identity)) => {
                let reuse = self.last.as_ref().filter(|c| {
                    c.revision == built.revision
                        && c.apis == *apis
                        && c.identity == identity
                        && c.acknowledged == acknowledged
                });
                let connection = match reuse {
                    Some(c) => c.clone(),
                    None => Arc::new(Connection {
                        name: self.name.clone(),
                        client: built.client.clone(),
                        revision: built.revision.clone(),
                        allow_cross_namespace_clones: self
                            .config
                            .spec
                            .allow_cross_namespace_clones
                            .unwrap_or(false),
                        apis: *apis,
                        identity,
                        acknowledged,
                    }),
                };
                self.last = Some(connection.clone());
                Health::Ready(connection)
            }
            _ => Health::NotReady {
                reason: verdict.reason,
                message: verdict.message.clone(),
                last: self.last.clone(),
            },
        };
        // Logged once per change of reason, not per probe.
        let before = self.ctx.registry.get(&self.name).map(|h| h.reason());
        if before != Some(verdict.reason) {
            tracing::info!(config = %self.name, reason = %verdict.reason, message = %verdict.message, "remote cluster");
        }
        self.ctx.registry.set(&self.name, health);
        let machines = (self.ctx.machines)(&self.name);
        let refresh = REFRESH_LAST_CHECKED.max(self.ctx.settings.probe_interval);
        let generation = self.config.metadata.generation;
        if let Some(status) = decide::status(
            self.written.as_ref(),
            &verdict,
            machines,
            generation,
            k8s_openapi::jiff::Timestamp::now(),
            refresh,
        ) {
            match write_status(&self.ctx.client, &self.name, &status).await {
                Ok(()) => self.written = Some(status),
                Err(e) => {
                    tracing::warn!(config = %self.name, error = %e, "writing the KubevirtConfig's status failed; retrying at the next probe")
                }
            }
        }
    }

    /// What the Secret, the kubeconfig in it and the remote API server say; None until the
    /// Secret was listed.
    async fn observe(&mut self) -> Option<Observation> {
        let spec = &self.config.spec;
        let secret = match &self.seen {
            Seen::Unknown => return None,
            Seen::Missing => {
                return Some(Observation::SecretNotFound {
                    namespace: spec.secret_namespace.clone(),
                    name: spec.kubeconfig_secret_ref.clone(),
                });
            }
            Seen::Forbidden(error) => {
                return Some(Observation::SecretForbidden {
                    namespace: spec.secret_namespace.clone(),
                    error: error.clone(),
                });
            }
            Seen::Present(secret) => secret,
        };
        let (kubeconfig, revision) = match kubeconfig::read(secret.data.as_ref()) {
            Ok((kc, raw)) => (kc, kubeconfig::revision(raw, spec)),
            Err(unusable) => {
                self.built = None;
                return Some(Observation::Unusable(unusable));
            }
        };
        if self.built.as_ref().map(|b| &b.revision) != Some(&revision) {
            // A new kubeconfig (or spec): a new client; the old one goes with its last reader.
            self.built = None;
            match probe::connect(kubeconfig, &self.ctx.settings).await {
                Ok((client, server)) => {
                    self.built = Some(Built {
                        revision,
                        client,
                        server,
                    })
                }
                Err(unusable) => return Some(Observation::Unusable(unusable)),
            }
        }
        let built = self.built.as_ref()?;
        let limit = self.ctx.settings.probe_timeout();
        Some(Observation::Probed(
            probe::probe(&built.client, &built.server, limit).await,
        ))
    }
}

/// Merge-patches the whole status (one condition: the list is replaced).
async fn write_status(
    client: &Client,
    name: &str,
    status: &KubevirtConfigStatus,
) -> Result<(), kube::Error> {
    let api: Api<KubevirtConfig> = Api::all(client.clone());
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patch = Patch::Merge(json!({ "status": status }));
    match api.patch_status(name, &params, &patch).await {
        Ok(_) => Ok(()),
        // Deleted meanwhile: the controller stops this loop.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
