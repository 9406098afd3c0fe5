//! The leader's certificate loop: read the objects, decide, act, and again, until nothing is left
//! to do now; then sleep until the decision may change by the clock alone, or until one of the
//! objects changes (watched), or the periodic resync.
//!
//! Run it only on the leader and stop it when leadership is lost. Overlapping leaders at a
//! handover are harmless: every write is conditional on the resourceVersion that was read.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::Notify;

use super::config::Settings;
use super::issue::{self, IssueError};
use super::metrics::Metrics;
use super::observed::{Observed, Snapshot, Stored, observe};
use super::rotation::{Action, Plan, Problem, Target, decide};
use super::store::{Store, StoreError};
use super::{
    BUNDLE_CONFIGMAP, CA_CERT_KEY, CA_SECRET, SERVING_SECRET, TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY,
    bundle,
};

/// Even with nothing due, everything is read again this often (watches can miss a change).
pub const RESYNC: Duration = Duration::from_secs(300);
/// A plan rarely needs more than five rounds (CA, bundle, webhooks, serving); more means
/// something keeps changing under us.
const MAX_ROUNDS: usize = 12;
const MAX_BACKOFF: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Issue(#[from] IssueError),
    #[error("asked to issue a serving certificate without a readable CA")]
    NoCa,
    #[error("certificates did not settle after {0} rounds: something keeps changing them")]
    Unsettled(usize),
}

pub struct CertManager {
    store: Store,
    client: Client,
    settings: Settings,
    metrics: Metrics,
    reported: Mutex<(Vec<Problem>, Option<String>)>,
}

impl CertManager {
    pub fn new(client: Client, settings: Settings, metrics: Metrics) -> Self {
        CertManager {
            store: Store::new(client.clone(), &settings.namespace)
                .with_webhook_configuration(&settings.webhook_configuration)
                .with_api_service(client.clone(), settings.api_service),
            client,
            settings,
            metrics,
            reported: Mutex::new((Vec::new(), None)),
        }
    }

    /// Keeps the certificates and webhook configurations right until `shutdown` resolves.
    /// API errors are logged and retried with backoff; this only returns on shutdown.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let changed = Arc::new(Notify::new());
        let triggers = tokio::spawn(watch_objects(
            self.client.clone(),
            self.settings.namespace.clone(),
            self.settings.webhook_configuration.clone(),
            self.settings.api_service,
            changed.clone(),
        ));
        let _stop_triggers = AbortOnDrop(triggers);
        tokio::pin!(shutdown);
        let mut backoff = Duration::from_secs(1);
        loop {
            let sleep = match self.converge().await {
                Ok(plan) => {
                    backoff = Duration::from_secs(1);
                    until(plan.wake_at, Utc::now())
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "certificate reconciliation failed");
                    let b = backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    b
                }
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = changed.notified() => {}
                () = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// Reads, decides and acts until nothing is left to do now; returns the last plan (no
    /// actions: what is awaited, problems, and when to look again).
    pub async fn converge(&self) -> Result<Plan, Error> {
        for _ in 0..MAX_ROUNDS {
            let snapshot = self.store.snapshot().await?;
            let observed = observe(&snapshot);
            let now = Utc::now();
            let plan = decide(&observed, &self.settings, now);
            self.report(&observed, &plan);
            if plan.actions.is_empty() {
                return Ok(plan);
            }
            for action in &plan.actions {
                match self.execute(action, &snapshot, &observed, now).await {
                    Ok(()) => {}
                    Err(Error::Store(StoreError::Conflict(what))) => {
                        tracing::debug!(%what, "changed meanwhile; reading again");
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Err(Error::Unsettled(MAX_ROUNDS))
    }

    async fn execute(
        &self,
        action: &Action,
        snapshot: &Snapshot,
        observed: &Observed,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        let reason = action.reason();
        let lifetimes = &self.settings.lifetimes;
        match action {
            Action::IssueCa { .. } => {
                let ca = issue::issue_ca(now, lifetimes.ca)?;
                let data = tls_data(&ca.cert_pem, &ca.key_pem, None);
                self.store
                    .write_tls_secret(CA_SECRET, snapshot.ca.as_ref(), data)
                    .await?;
                self.metrics.rotated("ca", reason.label());
                log_issued("CA", &ca.cert_pem, reason);
            }
            Action::WriteBundle { pem, .. } => {
                self.store
                    .write_bundle(snapshot.bundle.as_ref(), pem)
                    .await?;
                let serials: Vec<String> = super::x509::Cert::all_from_pem(pem.as_bytes())
                    .0
                    .into_iter()
                    .map(|c| c.serial)
                    .collect();
                tracing::info!(configmap = BUNDLE_CONFIGMAP, cas = ?serials, %reason, "CA bundle updated");
            }
            Action::WriteMutating { desired, .. } => {
                self.store.write_mutating(desired).await?;
                let name = self.store.webhook_configuration();
                tracing::info!(name, %reason, "MutatingWebhookConfiguration caBundle written");
            }
            Action::WriteValidating { desired, .. } => {
                self.store.write_validating(desired).await?;
                let name = self.store.webhook_configuration();
                tracing::info!(name, %reason, "ValidatingWebhookConfiguration caBundle written");
            }
            Action::WriteApiService { desired, .. } => {
                self.store.write_api_service(desired).await?;
                let name = super::api_service::NAME;
                tracing::info!(name, %reason, "APIService caBundle written");
            }
            Action::IssueServing { .. } => {
                let ca = observed.ca.ok().ok_or(Error::NoCa)?;
                let names = self.settings.serving_names();
                let pair = issue::issue_serving(&ca.pair, &names, now, lifetimes.serving)?;
                let data = tls_data(&pair.cert_pem, &pair.key_pem, Some(&ca.pair.cert_pem));
                self.store
                    .write_tls_secret(SERVING_SECRET, snapshot.serving.as_ref(), data)
                    .await?;
                self.metrics.rotated("serving", reason.label());
                log_issued("serving certificate", &pair.cert_pem, reason);
            }
        }
        Ok(())
    }

    /// Metrics every round; problems and waits logged when they change, not every round.
    fn report(&self, observed: &Observed, plan: &Plan) {
        if let Stored::Ok(ca) = &observed.ca {
            self.metrics.set_expiry("ca", ca.cert.not_after);
        }
        if let Stored::Ok(s) = &observed.serving {
            self.metrics.set_expiry("serving", s.cert.not_after);
        }
        if let Some(at) = observed
            .bundle
            .ok()
            .and_then(|b| bundle::next_expiry(&b.cas))
        {
            self.metrics.set_expiry("bundle", at);
        }
        for target in [
            Target::Ca,
            Target::Serving,
            Target::Bundle,
            Target::MutatingWebhook,
            Target::ValidatingWebhook,
            Target::ApiService,
        ] {
            let present = plan.problems.iter().any(|p| p.target() == target);
            self.metrics.set_problem(target_label(target), present);
        }
        let Ok(mut last) = self.reported.lock() else {
            return;
        };
        if last.0 != plan.problems {
            for p in &plan.problems {
                tracing::error!(problem = %p, "certificates cannot be maintained");
            }
            last.0.clone_from(&plan.problems);
        }
        if plan.actions.is_empty() && last.1 != plan.waiting {
            if let Some(w) = &plan.waiting {
                tracing::info!(waiting = %w, "certificate rotation in progress");
            }
            last.1.clone_from(&plan.waiting);
        }
    }
}

fn target_label(t: Target) -> &'static str {
    match t {
        Target::Ca => "ca_secret",
        Target::Serving => "serving_secret",
        Target::Bundle => "bundle_configmap",
        Target::MutatingWebhook => "mutating_webhook_configuration",
        Target::ValidatingWebhook => "validating_webhook_configuration",
        Target::ApiService => "api_service",
    }
}

fn tls_data(cert: &str, key: &str, ca: Option<&str>) -> BTreeMap<String, ByteString> {
    let mut data = BTreeMap::from([
        (
            TLS_CERT_KEY.to_owned(),
            ByteString(cert.as_bytes().to_vec()),
        ),
        (
            TLS_PRIVATE_KEY_KEY.to_owned(),
            ByteString(key.as_bytes().to_vec()),
        ),
    ]);
    if let Some(ca) = ca {
        data.insert(CA_CERT_KEY.to_owned(), ByteString(ca.as_bytes().to_vec()));
    }
    data
}

fn log_issued(what: &str, cert_pem: &str, reason: &super::rotation::Reason) {
    match super::x509::Cert::from_pem(cert_pem.as_bytes()) {
        Ok(c) => tracing::info!(
            serial = %c.serial,
            subject = %c.subject,
            not_after = %c.not_after,
            %reason,
            "issued {what}"
        ),
        Err(_) => tracing::info!(%reason, "issued {what}"),
    }
}

/// How long to sleep for a wake-up at `at`: a little after it (certificate times have whole
/// seconds), never less than a moment, never more than the resync period.
fn until(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
    let Some(at) = at else {
        return RESYNC;
    };
    let wait = (at - now).to_std().unwrap_or(Duration::ZERO) + Duration::from_millis(200);
    wait.clamp(Duration::from_millis(200), RESYNC)
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Every event of the object `name`, its content dropped: only that something changed counts.
fn changes<K>(
    api: Api<K>,
    name: &str,
) -> futures::stream::BoxStream<'static, Result<(), watcher::Error>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api, config)
        .default_backoff()
        .map(|e| e.map(|_| ()))
        .boxed()
}

/// Wakes `changed` whenever one of the five objects (six with the APIService) is added,
/// modified or deleted.
async fn watch_objects(
    client: Client,
    namespace: String,
    webhook_configuration: String,
    api_service: bool,
    changed: Arc<Notify>,
) {
    let api_services: Api<APIService> = Api::all(client.clone());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let mut streams = vec![
        changes(secrets.clone(), CA_SECRET),
        changes(secrets, SERVING_SECRET),
        changes(configmaps, BUNDLE_CONFIGMAP),
        changes(mutating, &webhook_configuration),
        changes(validating, &webhook_configuration),
    ];
    if api_service {
        streams.push(changes(api_services, super::api_service::NAME));
    }
    let mut all = futures::stream::select_all(streams);
    while let Some(event) = all.next().await {
        match event {
            Ok(()) => changed.notify_one(),
            Err(e) => {
                tracing::warn!(error = %e, "watching the certificate objects failed; retrying")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_are_bounded() {
        let now = Utc::now();
        assert_eq!(until(None, now), RESYNC);
        assert_eq!(
            until(Some(now - chrono::TimeDelta::hours(1)), now),
            Duration::from_millis(200)
        );
        assert_eq!(
            until(Some(now + chrono::TimeDelta::seconds(10)), now),
            Duration::from_millis(10_200)
        );
        assert_eq!(until(Some(now + chrono::TimeDelta::days(3)), now), RESYNC);
    }
}
