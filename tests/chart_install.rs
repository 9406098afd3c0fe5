//! The chart on a real control plane: `helm install` and `helm upgrade` (changed values roll the
//! objects), then `kubevirt-operator run` out of cluster with exactly the chart's RBAC, by
//! impersonating the chart's ServiceAccount, and the Deployment's environment: it must lead,
//! fill the chart's webhook configurations' caBundle, admit a Machine (kube-apiserver calling the
//! webhook Service) and create its VirtualMachine without a single request refused. Until it
//! has filled them, Machine writes are refused, not let through.

mod chart;
mod release;
mod support;

use std::time::Duration;

use chart::{NAMESPACE, RELEASE, chart_dir, run, tool};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use release::operator::{launch, ready, route_webhook_service};
use release::{
    SERVICE_ACCOUNT, env_of, helm, may_clone_from, refused, requests_as_service_account,
    webhook_sources,
};
use serde_json::{Value, json};
use support::{ControlPlane, Fixture, OPERATOR_NAMESPACE, eventually_with};

const WAIT: Duration = Duration::from_secs(60);

/// The namespaces of the scoped install.
const TEAMS: [&str; 2] = ["team-a", "team-b"];

#[tokio::test]
async fn helm_installs_upgrades_and_the_operator_runs_with_the_charts_rbac() {
    assert_eq!(NAMESPACE, OPERATOR_NAMESPACE);
    let cp = Fixture::new().with_fixture_crds().start().await;
    let client = cp.admin_client().await;

    // Install: CRDs from the chart's crds/, every template object. NetworkPolicies by default,
    // the webhook port open to any source while no apiServerCIDRs are set, which the notes say.
    let notes = run(helm(&cp, &["install", RELEASE]).arg(chart_dir()));
    assert!(
        notes.contains("WARNING: networkPolicy.apiServerCIDRs is empty"),
        "{notes}"
    );
    assert_eq!(webhook_sources(&client).await, None);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let d = deployments.get(SERVICE_ACCOUNT).await.expect("Deployment");
    assert_eq!(env_of(&d, "RUST_LOG").as_deref(), Some("info"));
    let generation = d.metadata.generation.expect("generation");
    assert_eq!(
        env_of(&d, "WEBHOOK_CONFIGURATION_NAME").as_deref(),
        Some(RELEASE),
        "the operator is told the configurations' name"
    );

    // The chart's webhook configurations have no caBundle until the operator fills it: a Machine
    // written now is refused (failurePolicy Fail), never stored unchecked.
    let refused_early = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "vitistack.io",
            "v1alpha1",
            "Machine",
        )),
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": "too-early"}, "spec": {"template": "small"}}),
        )
        .expect("Machine"),
    )
    .await
    .expect_err("a Machine admitted before the operator filled the caBundle");
    assert!(
        refused_early.to_string().contains("failed calling webhook"),
        "{refused_early}"
    );
    route_webhook_service(&client, "kubevirt-operator-webhook").await;

    // Upgrade with changed values: the Deployment rolls and namespace-scoped RBAC replaces the
    // cluster-wide rules.
    for ns in TEAMS {
        let mut team = k8s_openapi::api::core::v1::Namespace::default();
        team.metadata.name = Some(ns.to_owned());
        // As kube-apiserver 1.21+ labels it (this 1.20 one does not): the webhooks select
        // watched namespaces by it.
        team.metadata.labels = Some([("kubernetes.io/metadata.name".into(), ns.to_owned())].into());
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .create(&PostParams::default(), &team)
            .await
            .expect("namespace");
    }
    run(helm(
        &cp,
        &[
            "upgrade",
            RELEASE,
            "--set",
            "log.level=debug",
            "--set",
            "replicaCount=3",
            "--set",
            "watchNamespaces={team-a,team-b}",
            "--set",
            "cloneSourceNamespaces={team-a}",
            "--set",
            "networkPolicy.apiServerCIDRs={10.0.0.10/32}",
        ],
    )
    .arg(chart_dir()));
    assert_eq!(
        webhook_sources(&client).await,
        Some(json!([{"ipBlock": {"cidr": "10.0.0.10/32"}}])),
        "the webhook port from kube-apiserver's addresses only"
    );
    // CDI's clone right, where listed only.
    assert!(may_clone_from(&client, "team-a").await);
    assert!(!may_clone_from(&client, "team-b").await);
    let d = deployments.get(SERVICE_ACCOUNT).await.expect("Deployment");
    assert!(
        d.metadata.generation.expect("generation") > generation,
        "the Deployment rolled"
    );
    assert_eq!(env_of(&d, "RUST_LOG").as_deref(), Some("debug"));
    assert_eq!(
        env_of(&d, "WATCH_NAMESPACES").as_deref(),
        Some("team-a,team-b")
    );
    assert_eq!(d.spec.as_ref().and_then(|s| s.replicas), Some(3));
    for ns in TEAMS {
        Api::<Role>::namespaced(client.clone(), ns)
            .get(RELEASE)
            .await
            .expect("the Role in each watched namespace");
    }
    let cluster_role = Api::<ClusterRole>::all(client.clone())
        .get(RELEASE)
        .await
        .expect("ClusterRole");
    assert!(
        !cluster_role.rules.iter().flatten().any(|r| r
            .resources
            .iter()
            .flatten()
            .any(|x| x == "secrets")),
        "no cluster-wide Secret rights in namespace-scoped mode"
    );

    // Back to cluster-wide with the defaults: the per-namespace Roles go away, the webhook port
    // is open again.
    run(helm(&cp, &["upgrade", RELEASE, "--reset-values"]).arg(chart_dir()));
    assert_eq!(webhook_sources(&client).await, None);
    assert!(
        Api::<Role>::namespaced(client.clone(), "team-a")
            .get_opt(RELEASE)
            .await
            .expect("get")
            .is_none()
    );
    let history = run(helm(&cp, &["history", RELEASE, "-o", "json"]));
    let history: Value = serde_json::from_str(&history).expect("history JSON");
    assert_eq!(history.as_array().map(Vec::len), Some(3), "{history}");

    // The operator with exactly the chart's RBAC and environment, cluster-wide.
    operator_admits_and_reconciles(&cp, &client, &["default"]).await;
    let filled = ca_bundle(&client)
        .await
        .expect("the operator filled the caBundle");

    // Namespace-scoped: a Role in each of team-a and team-b, cluster-wide rules on cluster-scoped
    // objects only; a Machine in each namespace is reconciled (one set of watches each).
    run(helm(
        &cp,
        &[
            "upgrade",
            RELEASE,
            "--set",
            "watchNamespaces={team-a,team-b}",
        ],
    )
    .arg(chart_dir()));
    // Helm's upgrade leaves the operator's caBundle alone (it is not in the chart).
    assert_eq!(
        ca_bundle(&client).await,
        Some(filled),
        "caBundle kept by helm upgrade"
    );
    operator_admits_and_reconciles(&cp, &client, &TEAMS).await;
    assert!(
        requests_as_service_account(&cp) > 0,
        "requests were made as the ServiceAccount"
    );
    let refused = refused(&cp);
    assert!(
        refused.is_empty(),
        "refused with the chart's RBAC:\n{}",
        refused.join("\n")
    );

    // Every toggle on, as a second release in its own namespace (last: its cert-manager webhook
    // configurations point at a Service no pod serves here). The API server validates every
    // object, webhook configurations included; the foreign kinds install against stand-in CRDs.
    cp.install_crds(&[support::fixture("chart/foreign-crds.yaml")])
        .await
        .expect("stand-in CRDs");
    let all = chart::values_file("all-toggles", chart::ALL_TOGGLES);
    let mut install = tool("helm");
    install
        .args(["install", "edge"])
        .arg(chart_dir())
        .arg("-f")
        .arg(&all)
        .args(["--namespace", "edge-system", "--create-namespace"])
        // The CRDs are cluster-wide and the first release's: a second release leaves them be.
        .args(["--set", "crds.enabled=false"])
        .arg("--kubeconfig")
        .arg(cp.admin_kubeconfig());
    run(install);
    let kinds = [
        ("monitoring.coreos.com", "v1", "ServiceMonitor"),
        ("monitoring.coreos.com", "v1", "PrometheusRule"),
        ("cert-manager.io", "v1", "Certificate"),
        ("cert-manager.io", "v1", "Issuer"),
        ("networking.k8s.io", "v1", "NetworkPolicy"),
    ];
    for (group, version, kind) in kinds {
        let api = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            "edge-system",
            &ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind)),
        );
        let listed = api.list(&Default::default()).await.expect("list");
        assert!(!listed.items.is_empty(), "{kind} installed");
    }
    let hooks = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get("edge-kubevirt-operator")
        .await
        .expect("the chart's ValidatingWebhookConfiguration");
    assert_eq!(
        hooks
            .metadata
            .annotations
            .and_then(|a| a.get("cert-manager.io/inject-ca-from").cloned())
            .as_deref(),
        Some("edge-system/edge-kubevirt-operator-webhook-cert")
    );
    // The first release's configurations are untouched: each release has its own.
    let first = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get(RELEASE)
        .await
        .expect("the first release's ValidatingWebhookConfiguration");
    let service = first.webhooks.expect("webhooks")[0]
        .client_config
        .service
        .clone()
        .expect("a Service");
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str()),
        (NAMESPACE, "kubevirt-operator-webhook")
    );
}

/// The caBundle of the release's MutatingWebhookConfiguration.
async fn ca_bundle(client: &kube::Client) -> Option<k8s_openapi::ByteString> {
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(RELEASE)
        .await
        .ok()??;
    m.webhooks?.first()?.client_config.ca_bundle.clone()
}

/// Runs the operator as the chart's ServiceAccount until it is ready, its webhook configurations
/// are filled, a Machine in each of `namespaces` is admitted and its VirtualMachine created; then
/// stops it (SIGTERM: the Lease is released for the next run). Fails on any request refused.
async fn operator_admits_and_reconciles(
    cp: &ControlPlane,
    client: &kube::Client,
    namespaces: &[&str],
) {
    let (mut op, probes) = launch(cp, client, &[]).await;
    let log = || op_log(cp);
    eventually_with(WAIT, "the operator ready", log, || async move {
        ready(probes).await.then_some(())
    })
    .await;
    eventually_with(WAIT, "its webhook configurations filled", log, || {
        let client = client.clone();
        async move {
            let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .get_opt(RELEASE)
                .await
                .ok()??;
            let all = v
                .webhooks?
                .iter()
                .all(|h| h.client_config.ca_bundle.is_some());
            (all && ca_bundle(&client).await.is_some()).then_some(())
        }
    })
    .await;
    // A Machine through the webhooks in each namespace, then its VirtualMachine from the
    // reconciler.
    let gvk =
        |group, version, kind| ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    for namespace in namespaces {
        let machines = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            namespace,
            &gvk("vitistack.io", "v1alpha1", "Machine"),
        );
        let machine: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": "chart-vm", "namespace": namespace},
            "spec": {"template": "small"}
        }))
        .expect("Machine");
        eventually_with(WAIT, "the Machine admitted", log, || {
            let (machines, machine) = (machines.clone(), machine.clone());
            async move { machines.create(&PostParams::default(), &machine).await.ok() }
        })
        .await;
    }
    for namespace in namespaces {
        let vms = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            namespace,
            &gvk("kubevirt.io", "v1", "VirtualMachine"),
        );
        eventually_with(WAIT, "the VirtualMachine", log, || {
            let vms = vms.clone();
            async move { vms.get_opt("chart-vm").await.ok().flatten() }
        })
        .await;
    }
    assert!(op.exited().is_none(), "the operator exited\n{}", log());
    op.terminate(Duration::from_secs(15));
    let refused = refused(cp);
    assert!(
        refused.is_empty(),
        "refused with the chart's RBAC:\n{}\n{}",
        refused.join("\n"),
        log()
    );
}

fn op_log(cp: &ControlPlane) -> String {
    let text =
        std::fs::read_to_string(cp.dir().join("chart-operator/operator.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
