//! Issue 24, the release's life on a real control plane, as an admin lives it: installed from the
//! previous chart (CRDs in `crds/`, webhook configurations made by its operator), upgraded to
//! this one with `--take-ownership` (the CRD is updated, the configurations become the chart's
//! and keep their caBundle), checked with `helm test`, switched to cert-manager mode and back
//! without an orphaned configuration, and uninstalled: no webhook configuration is left, the
//! CRDs and Machines stay, and Machines can be edited and deleted.

mod chart;
mod release;
mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chart::{NAMESPACE, RELEASE, chart_dir, docs, repo, run, text};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use release::helm;
use release::operator::{launch, play_kubelet, ready, route_webhook_service};
use serde_json::{Value, json};
use support::{ControlPlane, Fixture, eventually_with};

use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::FINALIZER;
use kubevirt_operator::certs::{self, webhook_config};

const WAIT: Duration = Duration::from_secs(60);
const PREVIOUS: &str = "tests/fixtures/chart/previous/kubevirt-operator-0.1.0.tgz";

/// Every property path of the Machine CRD's schema (`spec.placement.affinity`, ...).
fn property_paths(schema: &Value, at: &str, out: &mut BTreeSet<String>) {
    for (name, sub) in schema["properties"].as_object().into_iter().flatten() {
        let path = format!("{at}.{name}");
        out.insert(path.clone());
        property_paths(sub, &path, out);
        property_paths(&sub["items"], &path, out);
    }
}

fn machine_crd_paths(crd: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    property_paths(
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        "",
        &mut out,
    );
    out
}

/// The Machine CRD of the previous chart (from its package) and of this one (files/crds/).
fn crd_paths_before_and_after() -> (BTreeSet<String>, BTreeSet<String>) {
    let dir = repo("target/previous-chart");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut untar = std::process::Command::new("tar");
    untar.arg("-xzf").arg(repo(PREVIOUS)).arg("-C").arg(&dir);
    run(untar);
    let machine = |yaml: &str| {
        docs(yaml)
            .into_iter()
            .find(|d| d["metadata"]["name"] == "machines.vitistack.io")
            .expect("the Machine CRD")
    };
    let before = std::fs::read_to_string(dir.join("kubevirt-operator/crds/crds.yaml"))
        .expect("the previous chart's crds/crds.yaml");
    let after =
        std::fs::read_to_string(chart_dir().join("files/crds/crds.yaml")).expect("files/crds");
    (
        machine_crd_paths(&machine(&before)),
        machine_crd_paths(&machine(&after)),
    )
}

/// Both configurations as the previous operator made them: named kubevirt-operator, its label,
/// its caBundle.
async fn legacy_webhook_configurations(client: &kube::Client, ca_bundle: &[u8]) {
    let lifetimes = certs::CertificateArgs::default()
        .lifetimes()
        .expect("lifetimes");
    let settings = certs::Settings::new(NAMESPACE, None, lifetimes).expect("settings");
    let mut m = webhook_config::mutating(&settings, ca_bundle);
    let mut v = webhook_config::validating(&settings, ca_bundle);
    m.metadata.labels = Some(certs::managed_labels());
    v.metadata.labels = Some(certs::managed_labels());
    let pp = PostParams::default();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&pp, &m)
        .await
        .expect("legacy MutatingWebhookConfiguration");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&pp, &v)
        .await
        .expect("legacy ValidatingWebhookConfiguration");
}

async fn ca_bundle(client: &kube::Client) -> Option<ByteString> {
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(RELEASE)
        .await
        .expect("get")?;
    m.webhooks?.first()?.client_config.ca_bundle.clone()
}

/// The names of every webhook configuration in the cluster, mutating then validating.
async fn webhook_configurations(client: &kube::Client) -> (Vec<String>, Vec<String>) {
    let names = |items: Vec<Option<String>>| items.into_iter().flatten().collect();
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list");
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list");
    (
        names(m.items.into_iter().map(|c| c.metadata.name).collect()),
        names(v.items.into_iter().map(|c| c.metadata.name).collect()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upgrade_from_the_previous_chart_test_and_uninstall() {
    let cp = Fixture::new().with_fixture_crds().start().await;
    let client = cp.admin_client().await;

    // The previous release: its CRDs from crds/, its operator's webhook configurations.
    run(helm(&cp, &["install", RELEASE, "--create-namespace"]).arg(repo(PREVIOUS)));
    let (before, after) = crd_paths_before_and_after();
    let added: Vec<&String> = after.difference(&before).collect();
    assert!(
        !added.is_empty(),
        "the fixture must predate a CRD change, or this cannot show an update"
    );
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    let mut kept: Machine = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "kept", "finalizers": [FINALIZER]},
        "spec": {"template": "small"}
    }))
    .expect("Machine");
    kept = machines
        .create(&PostParams::default(), &kept)
        .await
        .expect("a Machine of the previous release");
    let legacy_ca = b"-----BEGIN CERTIFICATE-----\nlegacy\n-----END CERTIFICATE-----\n";
    legacy_webhook_configurations(&client, legacy_ca).await;

    // Helm will not adopt objects it did not make unless told to.
    let refused = helm(&cp, &["upgrade", RELEASE])
        .arg(chart_dir())
        .output()
        .expect("helm");
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("invalid ownership metadata"),
        "{}",
        text(&refused)
    );
    run(helm(&cp, &["upgrade", RELEASE, "--take-ownership"]).arg(chart_dir()));

    // The CRD is the new one, the release's, and kept on uninstall.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let served = crds.get("machines.vitistack.io").await.expect("CRD");
    let served_paths = machine_crd_paths(&serde_json::to_value(&served).expect("json"));
    for path in &added {
        assert!(
            served_paths.contains(*path),
            "{path} not served after the upgrade"
        );
    }
    let annotations = served.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("helm.sh/resource-policy")
            .map(String::as_str),
        Some("keep")
    );
    assert_eq!(
        annotations
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some(RELEASE)
    );
    // The configurations are the release's now and still carry the old caBundle: no moment
    // without a working webhook.
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(RELEASE)
        .await
        .expect("MutatingWebhookConfiguration");
    assert_eq!(
        m.metadata
            .annotations
            .unwrap_or_default()
            .get("meta.helm.sh/release-name"),
        Some(&RELEASE.to_owned())
    );
    assert_eq!(
        ca_bundle(&client).await,
        Some(ByteString(legacy_ca.to_vec()))
    );

    // The new operator fills its own CA bundle in; `helm test` passes through the API server.
    route_webhook_service(&client, "kubevirt-operator-webhook").await;
    let (mut op, probes) = launch(&cp, &client, &[]).await;
    let log = || op_log(&cp);
    eventually_with(WAIT, "the operator ready", log, || async move {
        ready(probes).await.then_some(())
    })
    .await;
    eventually_with(WAIT, "the operator's caBundle", log, || {
        let client = client.clone();
        async move {
            let b = ca_bundle(&client).await?;
            (b.0 != legacy_ca).then_some(())
        }
    })
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let kubelet = {
        let (stop, client) = (stop.clone(), client.clone());
        let cp = &cp;
        async move { play_kubelet(cp, &client, || stop.load(Ordering::Relaxed)).await }
    };
    let helm_test = {
        let stop = stop.clone();
        let mut cmd = helm(&cp, &["test", RELEASE, "--timeout", "2m"]);
        async move {
            let out = tokio::task::spawn_blocking(move || cmd.output())
                .await
                .expect("join")
                .expect("helm test");
            stop.store(true, Ordering::Relaxed);
            out
        }
    };
    let (runs, tested) = tokio::join!(kubelet, helm_test);
    assert!(
        tested.status.success(),
        "helm test: {}\nthe test Pod:\n{}\n{}",
        text(&tested),
        runs.join("\n"),
        log()
    );
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].contains("are admitted by the webhooks"), "{runs:?}");
    op.terminate(Duration::from_secs(15));

    // Switching certificate modes keeps one configuration of each kind, the release's.
    cp.install_crds(&[support::fixture("chart/foreign-crds.yaml")])
        .await
        .expect("stand-in CRDs");
    for mode in ["cert-manager", "self-managed"] {
        let set = format!("certificates.mode={mode}");
        run(helm(&cp, &["upgrade", RELEASE, "--set", &set]).arg(chart_dir()));
        let names = webhook_configurations(&client).await;
        assert_eq!(
            names,
            (vec![RELEASE.to_owned()], vec![RELEASE.to_owned()]),
            "{mode}"
        );
    }

    // Uninstall: no webhook configuration anywhere; the CRDs and the Machine stay, and the
    // Machine can be edited (its finalizer removed) and deleted.
    run(helm(&cp, &["uninstall", RELEASE, "--wait"]));
    assert_eq!(webhook_configurations(&client).await, (vec![], vec![]));
    crds.get("machines.vitistack.io")
        .await
        .expect("the CRD is kept");
    let stored = machines.get("kept").await.expect("the Machine is kept");
    assert_eq!(stored.metadata.uid, kept.metadata.uid);
    machines
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null, "labels": {"edited": "yes"}}})),
        )
        .await
        .expect("a Machine edited after uninstall");
    machines
        .delete("kept", &DeleteParams::default())
        .await
        .expect("a Machine deleted after uninstall");
    eventually_with(WAIT, "the Machine gone", String::new, || async {
        machines.get_opt("kept").await.ok()?.is_none().then_some(())
    })
    .await;
    // With no webhook left, a new Machine is stored as written (unchecked until the operator is
    // installed again), never refused.
    let unchecked: Machine = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "after"}, "spec": {"template": "small"}
    }))
    .expect("Machine");
    let stored = machines
        .create(&PostParams::default(), &unchecked)
        .await
        .expect("a Machine created after uninstall");
    assert!(
        stored.metadata.finalizers.is_none(),
        "no webhook mutated it"
    );
}

fn op_log(cp: &ControlPlane) -> String {
    support::log_tail(&cp.dir().join("chart-operator/operator.log"), 40)
}
