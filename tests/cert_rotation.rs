//! End to end against a real kube-apiserver: the certificate manager, the serving-Secret watcher
//! and the project's own webhook server, with kube-apiserver calling the webhooks (URL
//! clientConfig `https://127.0.0.1:PORT/...`) for a continuous stream of Machine creates while
//! certificates rotate, are rotated on demand, or are deleted, corrupted and edited. The webhook
//! configurations are installed here as the chart installs them; the manager only fills them.
//!
//! The webhook configurations are cluster-wide and named `kubevirt-operator`, so the tests here
//! take turns (one lock) on the shared control plane; each uses its own namespace.

mod common;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubevirt_operator::admission::{Admission, routes};
use kubevirt_operator::api::machine::{Machine, MachineSpec};
use kubevirt_operator::certs::config::{Lifetimes, Settings};
use kubevirt_operator::certs::observed::{Observed, observe};
use kubevirt_operator::certs::store::Store;
use kubevirt_operator::certs::x509::Cert;
use kubevirt_operator::certs::{CertManager, Metrics, watch};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::tls::{CertSlot, server};
use rustls::pki_types::CertificateDer;
use serde_json::json;
use support::Fixture;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

static TAKE_TURNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A control plane with the Machine CRD, an admin client and a fresh namespace.
async fn cluster(prefix: &str) -> (Client, String) {
    let cp = Fixture::new().with_machine_crds().shared().await;
    let ns = cp.namespace(prefix).await.expect("namespace");
    (cp.client().await.expect("admin client"), ns)
}

/// One operator replica, as `kubevirt-operator run` wires it: the HTTPS webhook server on
/// 127.0.0.1:0 fed by the serving-Secret watcher, and the leader's certificate manager.
struct Operator {
    port: u16,
    slot: Arc<CertSlot>,
    metrics: Metrics,
    server: JoinHandle<()>,
    watcher: JoinHandle<()>,
    manager: Option<JoinHandle<()>>,
}

impl Operator {
    async fn start(client: &Client, ns: &str, lifetimes: Lifetimes) -> Operator {
        support::init_crypto();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let slot = CertSlot::new();
        let metrics = Metrics::new();
        let admission = Arc::new(
            Admission::new(Catalog::with_default("medium").expect("catalog")).expect("admission"),
        );
        let app = routes::router(admission);
        let server_slot = slot.clone();
        let server = tokio::spawn(async move {
            let _ = server::serve(listener, server_slot, app, std::future::pending()).await;
        });
        let watcher = tokio::spawn(watch::serve_from_secret(
            client.clone(),
            ns.to_owned(),
            slot.clone(),
            metrics.clone(),
        ));
        let mut op = Operator {
            port,
            slot,
            metrics,
            server,
            watcher,
            manager: None,
        };
        // The configurations the chart installs in a cluster, here for this replica's URL.
        support::webhooks::install(client, &op.settings(ns, lifetimes)).await;
        op.start_manager(client, ns, lifetimes);
        op
    }

    fn settings(&self, ns: &str, lifetimes: Lifetimes) -> Settings {
        Settings::new(
            ns,
            Some(&format!("https://127.0.0.1:{}", self.port)),
            lifetimes,
        )
        .expect("settings")
    }

    fn start_manager(&mut self, client: &Client, ns: &str, lifetimes: Lifetimes) {
        let manager = CertManager::new(
            client.clone(),
            self.settings(ns, lifetimes),
            self.metrics.clone(),
        );
        self.manager = Some(tokio::spawn(manager.run(std::future::pending())));
    }

    fn stop_manager(&mut self) {
        if let Some(m) = self.manager.take() {
            m.abort();
        }
    }

    fn served(&self) -> Option<CertificateDer<'static>> {
        let key = self.slot.current()?;
        key.end_entity_cert().ok().map(|c| c.clone().into_owned())
    }

    fn counter(&self, name: &str) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        self.metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        text.lines()
            .filter(|l| l.starts_with(name))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.stop_manager();
        self.watcher.abort();
        self.server.abort();
    }
}

fn small_machine(name: &str) -> Machine {
    Machine::new(
        name,
        MachineSpec {
            template: Some("small".to_owned()),
            ..MachineSpec::default()
        },
    )
}

/// Creates one Machine: Ok(true) when the mutating webhook ran (the template was expanded).
async fn create_machine(machines: &Api<Machine>, name: &str) -> Result<bool, String> {
    match machines
        .create(&PostParams::default(), &small_machine(name))
        .await
    {
        Ok(m) => {
            // Keep etcd small; deletes are not admission-checked by our webhooks. No reconciler
            // runs here to remove the cleanup finalizer the mutating webhook added, so the test
            // removes it (an UPDATE through both webhooks) and the Machine goes.
            if machines
                .delete(name, &DeleteParams::default())
                .await
                .is_ok()
            {
                let release = json!({"metadata": {"finalizers": null}});
                let _ = machines
                    .patch(name, &PatchParams::default(), &Patch::Merge(&release))
                    .await;
            }
            Ok(m.spec.resources.is_some())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Until Machine creates succeed and are mutated: kube-apiserver has our configuration and
/// trusts our certificate.
async fn wait_for_webhooks(client: &Client, ns: &str) -> Duration {
    let started = Instant::now();
    let machines: Api<Machine> = Api::namespaced(client.clone(), ns);
    for i in 0.. {
        let last = match create_machine(&machines, &format!("warmup-{i}")).await {
            Ok(true) => return started.elapsed(),
            Ok(false) => "created without mutation (webhook configuration not seen yet)".to_owned(),
            Err(e) => e,
        };
        assert!(
            started.elapsed() < secs(60),
            "webhooks never started serving: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    unreachable!()
}

#[derive(Debug, Clone)]
struct Outcome {
    at: Instant,
    result: Result<bool, String>,
}

/// Machine creates, one after another, until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<Outcome>>,
}

#[derive(Debug)]
struct Tally {
    made: usize,
    failed: Vec<(Duration, String)>,
    unmutated: usize,
}

impl Load {
    fn start(client: &Client, ns: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let machines: Api<Machine> = Api::namespaced(client.clone(), ns);
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut out = Vec::new();
            let mut i = 0u64;
            while !flag.load(Ordering::Relaxed) {
                i += 1;
                let result = create_machine(&machines, &format!("load-{i}")).await;
                out.push(Outcome {
                    at: Instant::now(),
                    result,
                });
            }
            out
        });
        Load { stop, task }
    }

    async fn finish(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("load task")
    }
}

fn tally(outcomes: &[Outcome], since: Instant, until: Instant) -> Tally {
    let window: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.at >= since && o.at <= until)
        .collect();
    Tally {
        made: window.len(),
        failed: window
            .iter()
            .filter_map(|o| {
                o.result
                    .as_ref()
                    .err()
                    .map(|e| (o.at.duration_since(since), e.clone()))
            })
            .collect(),
        unmutated: window
            .iter()
            .filter(|o| matches!(o.result, Ok(false)))
            .count(),
    }
}

async fn observed(store: &Store) -> Observed {
    observe(&store.snapshot().await.expect("snapshot"))
}

/// Polls the stored objects until `done` holds; returns how long it took.
async fn until_state(
    store: &Store,
    what: &str,
    within: Duration,
    done: impl Fn(&Observed) -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        let o = observed(store).await;
        if done(&o) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{what}: not reached within {within:?}; last state: {o:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn ca_of(o: &Observed) -> Option<Cert> {
    o.ca.ok().map(|c| c.cert.clone())
}

fn serving_of(o: &Observed) -> Option<Cert> {
    o.serving.ok().map(|s| s.cert.clone())
}

fn bundle_of(o: &Observed) -> Vec<Cert> {
    o.bundle.ok().map(|b| b.cas.clone()).unwrap_or_default()
}

fn mutating_bundle(o: &Observed) -> Vec<Cert> {
    o.mutating
        .ok()
        .and_then(|m| {
            m.webhooks
                .as_ref()?
                .first()?
                .client_config
                .ca_bundle
                .clone()
        })
        .map(|b| Cert::all_from_pem(&b.0).0)
        .unwrap_or_default()
}

/// Everything settled: serving from the current CA, which is in the bundle and both webhook
/// configurations, and this replica serves exactly the stored certificate.
fn settled(o: &Observed, op: &Operator) -> bool {
    let (Some(ca), Some(s)) = (o.ca.ok(), o.serving.ok()) else {
        return false;
    };
    s.issuer_ca.as_ref() == Some(&ca.cert)
        && bundle_of(o).contains(&ca.cert)
        && mutating_bundle(o) == bundle_of(o)
        && op.served().as_ref() == Some(&s.cert.der)
}

/// The tests, by subject, in tests/cert_rotation/ (still one test binary).
mod cert_rotation {
    mod api_service;
    mod connections;
    mod healing;
    mod rotation;
}
