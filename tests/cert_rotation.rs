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

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubevirt_operator::admission::{Admission, VALIDATE_PATH, routes};
use kubevirt_operator::api::machine::{Machine, MachineSpec};
use kubevirt_operator::certs::config::{Lifetimes, RenewBefore, Settings};
use kubevirt_operator::certs::observed::{Observed, Stored, observe};
use kubevirt_operator::certs::store::Store;
use kubevirt_operator::certs::x509::Cert;
use kubevirt_operator::certs::{
    BUNDLE_CONFIGMAP, BUNDLE_KEY, CA_SECRET, CertManager, Metrics, SERVING_SECRET, TLS_CERT_KEY,
    WEBHOOK_CONFIGURATION, issue, watch,
};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhooks_keep_working_through_a_full_ca_rotation() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-rotation").await;
    // CA 90 seconds, serving 30 seconds, each renewed at 80%.
    let lifetimes =
        Lifetimes::new(secs(90), secs(30), RenewBefore::Percent(20)).expect("lifetimes");
    let op = Operator::start(&client, &ns, lifetimes).await;
    let store = Store::new(client.clone(), &ns);
    let warmup = wait_for_webhooks(&client, &ns).await;
    let first = observed(&store).await;
    let first_ca = ca_of(&first).expect("a CA was created");

    let started = Instant::now();
    let load = Load::start(&client, &ns);
    // A full rotation: a new CA, serving certificates from it, and the first CA gone from the
    // bundle and the webhook configurations once it expired.
    let waited = until_state(&store, "full CA rotation", secs(200), |o| {
        let bundle = bundle_of(o);
        ca_of(o).is_some_and(|ca| ca != first_ca)
            && !bundle.contains(&first_ca)
            && mutating_bundle(o) == bundle
            && settled(o, &op)
    })
    .await;
    // Keep going past the switch for a couple of serving renewals from the new CA.
    tokio::time::sleep(secs(5)).await;
    let outcomes = load.finish().await;
    let t = tally(&outcomes, started, Instant::now());
    let rotations = op.counter("kubevirt_operator_certificate_rotations_total");
    let reloads = op.counter("kubevirt_operator_certificate_reloads_total");
    eprintln!(
        "full CA rotation: warm-up {warmup:?}; rotation complete after {waited:?}; {} Machine creates, {} failed, {} not mutated; wall {:?}\n{rotations}\n{reloads}",
        t.made,
        t.failed.len(),
        t.unmutated,
        started.elapsed()
    );
    assert!(t.made > 100, "the load kept creating Machines: {}", t.made);
    assert!(
        t.failed.is_empty(),
        "failed admissions during rotation: {:?}",
        t.failed
    );
    assert_eq!(
        t.unmutated, 0,
        "every create went through the mutating webhook"
    );
    assert!(
        rotations.contains("certificate=\"ca\",reason=\"renewal_due\""),
        "{rotations}"
    );
    assert!(
        rotations.contains("certificate=\"serving\",reason=\"ca_rotated\""),
        "{rotations}"
    );
    assert!(
        rotations.contains("certificate=\"serving\",reason=\"renewal_due\""),
        "{rotations}"
    );
}

fn binary() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
}

async fn run_cli(ns: &str, args: &[&str]) -> (bool, String, String) {
    let cp = Fixture::new().with_machine_crds().shared().await;
    let mut cmd = binary();
    cmd.args(["certs"])
        .args(args)
        .env("KUBECONFIG", cp.admin_kubeconfig())
        .env("NAMESPACE", ns)
        .env("LOG_FORMAT", "text");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("run kubevirt-operator certs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn certs_rotate_on_demand_and_status() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-rotate").await;
    // KubeVirt's defaults: nothing would rotate by itself during this test.
    let lifetimes = Lifetimes::new(secs(168 * 3600), secs(24 * 3600), RenewBefore::Percent(20))
        .expect("lifetimes");
    let op = Operator::start(&client, &ns, lifetimes).await;
    let store = Store::new(client.clone(), &ns);
    wait_for_webhooks(&client, &ns).await;
    let before = observed(&store).await;
    let (ca0, serving0) = (
        ca_of(&before).expect("CA"),
        serving_of(&before).expect("serving"),
    );

    let started = Instant::now();
    let load = Load::start(&client, &ns);

    let (ok, out, err) = run_cli(&ns, &["rotate", "--timeout", "60s"]).await;
    assert!(ok, "certs rotate failed:\n{out}\n{err}");
    assert!(out.contains("new serving certificate issued"), "{out}");
    let mid = observed(&store).await;
    assert_eq!(
        ca_of(&mid).as_ref(),
        Some(&ca0),
        "serving rotation keeps the CA"
    );
    assert_ne!(serving_of(&mid).as_ref(), Some(&serving0));

    let t_ca = Instant::now();
    let (ok, out, err) = run_cli(&ns, &["rotate", "--ca", "--timeout", "60s"]).await;
    let ca_rotation_took = t_ca.elapsed();
    assert!(ok, "certs rotate --ca failed:\n{out}\n{err}");
    assert!(out.contains("new CA issued"), "{out}");
    assert!(out.contains("new serving certificate issued"), "{out}");
    let after = observed(&store).await;
    let ca1 = ca_of(&after).expect("CA");
    assert_ne!(ca1, ca0);
    // The old CA stays trusted until it expires; the serving certificate comes from the new one.
    assert_eq!(bundle_of(&after), vec![ca0.clone(), ca1.clone()]);
    assert_eq!(
        after.serving.ok().and_then(|s| s.issuer_ca.clone()),
        Some(ca1.clone())
    );
    until_state(
        &store,
        "replica serves the new certificate",
        secs(10),
        |o| settled(o, &op),
    )
    .await;
    tokio::time::sleep(secs(2)).await;

    let outcomes = load.finish().await;
    let t = tally(&outcomes, started, Instant::now());
    eprintln!(
        "certs rotate: {} Machine creates, {} failed, {} not mutated; `rotate --ca` took {ca_rotation_took:?}; wall {:?}",
        t.made,
        t.failed.len(),
        t.unmutated,
        started.elapsed()
    );
    assert!(t.made > 20, "{}", t.made);
    assert!(t.failed.is_empty(), "failed admissions: {:?}", t.failed);
    assert_eq!(t.unmutated, 0);

    let (ok, out, err) = run_cli(&ns, &["status"]).await;
    assert!(ok, "certs status failed:\n{out}\n{err}");
    for expected in [
        format!("Namespace: {ns}"),
        format!("Subject:     {}", ca1.subject),
        format!("Serial:      {}", ca0.serial),
        "  [2]".to_owned(),
        format!("SANs:        kubevirt-operator-webhook, kubevirt-operator-webhook.{ns}"),
        "127.0.0.1".to_owned(),
        "MutatingWebhookConfiguration: caBundle = the bundle (2 CA(s))".to_owned(),
        "ValidatingWebhookConfiguration: caBundle = the bundle (2 CA(s))".to_owned(),
        "kube-apiserver trusts the serving certificate (checked for 127.0.0.1).".to_owned(),
    ] {
        assert!(out.contains(&expected), "status lacks {expected:?}:\n{out}");
    }

    // No leader in a namespace without certificates: a clear error, not a hang.
    let (ok, _, err) = run_cli("default", &["rotate", "--timeout", "5s"]).await;
    assert!(!ok);
    assert!(err.contains("does not exist"), "{err}");
}

/// Replaces `key` of a managed Secret with garbage, keeping the label (ours, but broken).
async fn corrupt_secret(secrets: &Api<Secret>, name: &str) {
    let mut s = secrets.get(name).await.expect("get Secret");
    s.data.get_or_insert_default().insert(
        TLS_CERT_KEY.to_owned(),
        ByteString(b"-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n".to_vec()),
    );
    secrets
        .replace(name, &PostParams::default(), &s)
        .await
        .expect("corrupt Secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleted_corrupted_and_edited_objects_heal_without_failed_admissions() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-heal").await;
    let lifetimes = Lifetimes::new(secs(168 * 3600), secs(24 * 3600), RenewBefore::Percent(20))
        .expect("lifetimes");
    let mut op = Operator::start(&client, &ns, lifetimes).await;
    let store = Store::new(client.clone(), &ns);
    wait_for_webhooks(&client, &ns).await;
    until_state(&store, "settled", secs(30), |o| settled(o, &op)).await;
    tokio::time::sleep(secs(3)).await; // past the first CA's publish grace

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let other_ca = issue::issue_ca(chrono::Utc::now(), chrono::TimeDelta::hours(1)).expect("CA");

    let started = Instant::now();
    let load = Load::start(&client, &ns);
    let mut windows: Vec<(&str, Instant, Instant)> = Vec::new();
    let dp = DeleteParams::default();

    macro_rules! scenario {
        ($name:expr, $break_it:expr, $healed:expr) => {{
            let before = observed(&store).await;
            let t0 = Instant::now();
            $break_it;
            let took = until_state(&store, $name, secs(60), |o| $healed(&before, o)).await;
            until_state(&store, concat!($name, " (settled)"), secs(30), |o| {
                settled(o, &op)
            })
            .await;
            eprintln!("{}: healed in {took:?}", $name);
            windows.push(($name, t0, Instant::now()));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }};
    }

    let new_serving = |b: &Observed, o: &Observed| {
        serving_of(o).is_some_and(|s| Some(&s) != serving_of(b).as_ref())
    };
    let new_ca = |b: &Observed, o: &Observed| {
        ca_of(o).is_some_and(|c| Some(&c) != ca_of(b).as_ref())
            && o.serving.ok().and_then(|s| s.issuer_ca.clone()) == ca_of(o)
    };
    let bundle_back = |b: &Observed, o: &Observed| {
        matches!(o.bundle, Stored::Ok(_)) && ca_of(b).is_some_and(|c| bundle_of(o).contains(&c))
    };

    scenario!(
        "serving Secret deleted",
        secrets.delete(SERVING_SECRET, &dp).await.expect("delete"),
        new_serving
    );
    scenario!(
        "serving Secret corrupted",
        corrupt_secret(&secrets, SERVING_SECRET).await,
        new_serving
    );
    scenario!(
        "serving Secret replaced by an Opaque one",
        {
            secrets.delete(SERVING_SECRET, &dp).await.expect("delete");
            let opaque = Secret {
                metadata: ObjectMeta {
                    name: Some(SERVING_SECRET.to_owned()),
                    labels: Some(kubevirt_operator::certs::managed_labels()),
                    ..ObjectMeta::default()
                },
                type_: Some("Opaque".to_owned()),
                data: Some([("junk".to_owned(), ByteString(b"x".to_vec()))].into()),
                ..Secret::default()
            };
            secrets
                .create(&PostParams::default(), &opaque)
                .await
                .expect("create");
        },
        |b: &Observed, o: &Observed| new_serving(b, o)
    );
    assert_eq!(
        secrets
            .get(SERVING_SECRET)
            .await
            .expect("get")
            .type_
            .as_deref(),
        Some("kubernetes.io/tls"),
        "a Secret of another type is replaced, not patched"
    );
    scenario!(
        "CA Secret deleted",
        secrets.delete(CA_SECRET, &dp).await.expect("delete"),
        new_ca
    );
    scenario!(
        "CA Secret corrupted",
        corrupt_secret(&secrets, CA_SECRET).await,
        new_ca
    );
    scenario!(
        "bundle ConfigMap corrupted",
        {
            let mut cm = configmaps.get(BUNDLE_CONFIGMAP).await.expect("get");
            cm.data = Some([(BUNDLE_KEY.to_owned(), "garbage".to_owned())].into());
            configmaps
                .replace(BUNDLE_CONFIGMAP, &PostParams::default(), &cm)
                .await
                .expect("corrupt");
        },
        bundle_back
    );
    scenario!(
        "bundle ConfigMap deleted",
        configmaps
            .delete(BUNDLE_CONFIGMAP, &dp)
            .await
            .expect("delete"),
        bundle_back
    );
    scenario!(
        "ValidatingWebhookConfiguration caBundle edited (extra CA)",
        {
            let mut v = validating.get(WEBHOOK_CONFIGURATION).await.expect("get");
            for h in v.webhooks.iter_mut().flatten() {
                let mut pem = h.client_config.ca_bundle.clone().unwrap_or_default().0;
                pem.extend_from_slice(other_ca.cert_pem.as_bytes());
                h.client_config.ca_bundle = Some(ByteString(pem));
            }
            validating
                .replace(WEBHOOK_CONFIGURATION, &PostParams::default(), &v)
                .await
                .expect("edit");
        },
        |_: &Observed, o: &Observed| o.validating.ok().is_some_and(|v| {
            v.webhooks.iter().flatten().all(|h| {
                h.client_config
                    .ca_bundle
                    .as_ref()
                    .map(|b| Cert::all_from_pem(&b.0).0)
                    == Some(bundle_of(o))
            })
        })
    );
    let benign_end = Instant::now();

    // An edit that breaks trust: kube-apiserver refuses to call the webhook until the operator
    // has put the bundle back. Requests in that window can fail; none may fail after it.
    let broke_at = Instant::now();
    {
        let mut m = mutating.get(WEBHOOK_CONFIGURATION).await.expect("get");
        for h in m.webhooks.iter_mut().flatten() {
            h.client_config.ca_bundle = Some(ByteString(other_ca.cert_pem.clone().into_bytes()));
        }
        mutating
            .replace(WEBHOOK_CONFIGURATION, &PostParams::default(), &m)
            .await
            .expect("edit");
    }
    let healed_in = until_state(&store, "mutating caBundle restored", secs(30), |o| {
        mutating_bundle(o) == bundle_of(o)
    })
    .await;
    // kube-apiserver sees the restored configuration through its own informer, a moment later.
    let healed_at = Instant::now() + secs(1);
    tokio::time::sleep(secs(3)).await;

    // A foreign object is reported and left alone: stop the manager, replace the bundle
    // ConfigMap with an unlabelled one, start a manager again.
    op.stop_manager();
    let kept_bundle = observed(&store).await;
    configmaps
        .delete(BUNDLE_CONFIGMAP, &dp)
        .await
        .expect("delete");
    let foreign = ConfigMap {
        metadata: ObjectMeta {
            name: Some(BUNDLE_CONFIGMAP.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([(BUNDLE_KEY.to_owned(), "someone else's".to_owned())].into()),
        ..ConfigMap::default()
    };
    configmaps
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign ConfigMap");
    op.start_manager(&client, &ns, lifetimes);
    let problems = async {
        let started = Instant::now();
        loop {
            let p = op.counter("kubevirt_operator_certificate_problems");
            if p.contains("object=\"bundle_configmap\"} 1") {
                return p;
            }
            assert!(
                started.elapsed() < secs(20),
                "foreign ConfigMap not reported: {p}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    .await;
    tokio::time::sleep(secs(2)).await;
    let cm = configmaps.get(BUNDLE_CONFIGMAP).await.expect("get");
    assert_eq!(
        cm.data
            .as_ref()
            .and_then(|d| d.get(BUNDLE_KEY))
            .map(String::as_str),
        Some("someone else's")
    );
    assert!(
        cm.metadata.labels.is_none(),
        "never labelled or overwritten"
    );
    let now = observed(&store).await;
    assert_eq!(
        mutating_bundle(&now),
        bundle_of(&kept_bundle),
        "webhooks keep the last published bundle"
    );
    tokio::time::sleep(secs(2)).await;

    let outcomes = load.finish().await;
    let end = Instant::now();
    let benign = tally(&outcomes, started, benign_end);
    let broken = tally(&outcomes, broke_at, healed_at);
    let after = tally(&outcomes, healed_at, end);
    for (name, from, to) in &windows {
        let t = tally(&outcomes, *from, *to);
        eprintln!(
            "  {name}: {} creates, {} failed, {} not mutated",
            t.made,
            t.failed.len(),
            t.unmutated
        );
    }
    eprintln!(
        "healing: {} creates with {} failed and {} not mutated while Secrets, the bundle and webhook configurations were deleted, corrupted and edited; breaking caBundle edit healed in {healed_in:?} with {} of {} creates failing in that window; {} creates afterwards (incl. a foreign bundle ConfigMap, {problems}) with {} failed; wall {:?}",
        benign.made,
        benign.failed.len(),
        benign.unmutated,
        broken.failed.len(),
        broken.made,
        after.made,
        after.failed.len(),
        started.elapsed()
    );
    assert!(
        benign.failed.is_empty(),
        "failed admissions: {:?}",
        benign.failed
    );
    assert!(
        after.failed.is_empty(),
        "failed admissions after healing: {:?}",
        after.failed
    );
    assert!(
        healed_in < secs(5),
        "breaking caBundle edit healed in {healed_in:?}"
    );
}

/// A keep-alive connection opened before a Secret-driven swap keeps working with the
/// certificate it agreed on; new handshakes get the new certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keep_alive_connections_survive_a_secret_driven_swap() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-keepalive").await;
    let lifetimes = Lifetimes::new(secs(168 * 3600), secs(24 * 3600), RenewBefore::Percent(20))
        .expect("lifetimes");
    let op = Operator::start(&client, &ns, lifetimes).await;
    let store = Store::new(client.clone(), &ns);
    until_state(&store, "settled", secs(30), |o| settled(o, &op)).await;
    let o = observed(&store).await;
    let first = serving_of(&o).expect("serving");
    let config = client_config(&bundle_of(&o));
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], op.port));
    let mut conn = common::HttpsConn::connect(addr, config.clone())
        .await
        .expect("connect");
    post(&mut conn, "before").await;
    assert_eq!(conn.peer_certificate(), first.der);

    let asked = Instant::now();
    store
        .request_rotation(false, chrono::Utc::now())
        .await
        .expect("request rotation");
    until_state(&store, "new serving certificate served", secs(30), |o| {
        serving_of(o).is_some_and(|s| s != first) && settled(o, &op)
    })
    .await;
    let second = serving_of(&observed(&store).await).expect("serving");
    eprintln!(
        "serving certificate replaced and loaded {:?} after the request",
        asked.elapsed()
    );

    post(&mut conn, "after").await;
    assert_eq!(
        conn.peer_certificate(),
        first.der,
        "the open connection keeps its certificate"
    );
    // A new client configuration: no TLS session to resume, so a full handshake.
    let fresh = common::HttpsConn::connect(addr, client_config(&bundle_of(&o)))
        .await
        .expect("connect");
    assert_eq!(
        fresh.peer_certificate(),
        second.der,
        "new handshakes get the new certificate"
    );
}

fn client_config(bundle: &[Cert]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in bundle {
        roots.add(ca.der.clone()).expect("root");
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

async fn post(conn: &mut common::HttpsConn, uid: &str) {
    let body = serde_json::to_vec(&common::valid_review(uid)).expect("JSON");
    let r = conn
        .post_json(VALIDATE_PATH, &body)
        .await
        .expect("request on the open connection");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["response"]["uid"], uid);
}

/// A leader issues a new CA and is replaced before it could publish it (its CA already older
/// than the publish grace). The new leader publishes the CA, stamps the webhook configurations
/// with the time of that write, and switches the serving certificate to the new CA only a full
/// grace later, counted from the stamp: under a stream of Machine creates, none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_change_between_ca_issue_and_serving_issue_fails_no_admission() {
    use kubevirt_operator::certs::published::{Published, published};
    use kubevirt_operator::certs::{CA_BUNDLE_WRITTEN_ANNOTATION, TLS_PRIVATE_KEY_KEY};

    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-handover").await;
    // Long lifetimes: nothing comes due on its own; the grace is the full PUBLISH_GRACE.
    let lifetimes =
        Lifetimes::new(secs(3600), secs(1200), RenewBefore::Percent(20)).expect("lifetimes");
    let mut op = Operator::start(&client, &ns, lifetimes).await;
    let grace = op.settings(&ns, lifetimes).publish_grace;
    let store = Store::new(client.clone(), &ns);
    wait_for_webhooks(&client, &ns).await;
    until_state(&store, "settled", secs(30), |o| settled(o, &op)).await;
    let first_serving = serving_of(&observed(&store).await).expect("serving certificate");

    let started = Instant::now();
    let load = Load::start(&client, &ns);
    tokio::time::sleep(secs(1)).await;
    // The first leader issues a CA (a minute ago) and is gone before it publishes it.
    op.stop_manager();
    let snapshot = store.snapshot().await.expect("snapshot");
    let ca = issue::issue_ca(
        chrono::Utc::now() - chrono::TimeDelta::minutes(1),
        lifetimes.ca,
    )
    .expect("CA");
    let data = [
        (TLS_CERT_KEY, &ca.cert_pem),
        (TLS_PRIVATE_KEY_KEY, &ca.key_pem),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect();
    store
        .write_tls_secret(CA_SECRET, snapshot.ca.as_ref(), data)
        .await
        .expect("the first leader's CA");
    let new_ca = Cert::from_pem(ca.cert_pem.as_bytes()).expect("CA parses");

    // The next leader.
    tokio::time::sleep(secs(1)).await;
    op.start_manager(&client, &ns, lifetimes);
    let switched = until_state(&store, "serving from the new CA", secs(60), |o| {
        ca_of(o).as_ref() == Some(&new_ca) && settled(o, &op)
    })
    .await;
    let o = observed(&store).await;
    let Published::At(stamped) = published(&o, &op.settings(&ns, lifetimes)) else {
        panic!(
            "the webhook configurations carry no {CA_BUNDLE_WRITTEN_ANNOTATION}: {:#?}",
            o.mutating
        );
    };
    let serving = serving_of(&o).expect("serving certificate");
    assert_ne!(serving, first_serving);
    // Certificate times have whole seconds.
    assert!(
        serving.issued_at() + chrono::TimeDelta::seconds(1) >= stamped + grace,
        "serving certificate issued at {}, before the grace ({grace}) after the webhooks were written at {stamped}",
        serving.issued_at()
    );
    tokio::time::sleep(secs(3)).await;
    let outcomes = load.finish().await;
    let t = tally(&outcomes, started, Instant::now());
    eprintln!(
        "leader change before publishing: switched after {switched:?}; {} Machine creates, {} failed, {} not mutated",
        t.made,
        t.failed.len(),
        t.unmutated
    );
    assert!(t.made > 20, "the load kept creating Machines: {}", t.made);
    assert!(
        t.failed.is_empty(),
        "failed admissions across the handover: {:?}",
        t.failed
    );
    assert_eq!(t.unmutated, 0);
}
