//! Issue 22, remote clusters through KubevirtConfig, on two real control planes: the management
//! one holds the CRDs, the KubevirtConfigs and their kubeconfig Secrets; the remote one has
//! KubeVirt's and CDI's CRDs (not Multus'). `clusters::run` runs in-process with a 1 s probe
//! interval, so the test reads both the status it writes and the [`Registry`] the reconciler
//! reads: each bad Secret's reason, a rotation from refused credentials to good ones without a
//! restart, the remote API server stopped and started again, and a deleted KubevirtConfig
//! leaving the registry. Also: `manifests/remote-cluster-rbac.yaml` grants its ServiceAccount
//! exactly what docs/user/remote-clusters.md says, checked with SubjectAccessReviews on a control plane.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use kubevirt_operator::api::KubevirtConfig;
use kubevirt_operator::api::kubevirt_config::KubevirtConfigStatus;
use kubevirt_operator::clusters::{self, Health, Reason, Registry};
use support::{Fixture, OPERATOR_NAMESPACE, eventually};

/// Probes run every second; a state they reach takes a few, more on a busy machine.
const WAIT: Duration = Duration::from_secs(60);

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A kubeconfig for `server` with a bearer token (the API server refuses an unknown one: 401).
fn token_kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: r, cluster: {{server: '{server}', certificate-authority-data: {ca}}}}}]\nusers: [{{name: u, user: {{token: {token}}}}}]\ncontexts: [{{name: r, context: {{cluster: r, user: u}}}}]\ncurrent-context: r\n"
    )
}

async fn secret(client: &Client, name: &str, key: &str, value: &str) {
    let s: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
        "stringData": {key: value}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .create(&PostParams::default(), &s)
        .await
        .unwrap_or_else(|e| panic!("secret {name}: {e}"));
}

async fn config(configs: &Api<KubevirtConfig>, name: &str, secret: &str) {
    config_in(configs, name, secret, OPERATOR_NAMESPACE).await;
}

async fn config_in(configs: &Api<KubevirtConfig>, name: &str, secret: &str, namespace: &str) {
    let c: KubevirtConfig = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": {"name": name},
        "spec": {"kubeconfigSecretRef": secret, "secretNamespace": namespace}
    }))
    .expect("config");
    configs
        .create(&PostParams::default(), &c)
        .await
        .unwrap_or_else(|e| panic!("KubevirtConfig {name}: {e}"));
}

/// Waits until `name`'s status says `reason` and the registry agrees; returns the status.
async fn reason_is(
    configs: &Api<KubevirtConfig>,
    registry: &Registry,
    name: &str,
    reason: Reason,
) -> KubevirtConfigStatus {
    eventually(WAIT, &format!("{name}: {reason}"), || async {
        let status = configs.get(name).await.ok()?.status?;
        let in_registry = registry.get(name).map(|h| h.reason());
        (status.reason.as_deref() == Some(reason.as_str()) && in_registry == Some(reason))
            .then_some(status)
    })
    .await
}

/// The user of [`least_privileged`].
const CONTROLLER: &str = "clusters-controller";

/// `management` with a user, [`CONTROLLER`], holding exactly the operator's KubevirtConfig rules
/// of `manifests/rbac/cluster_role.yaml` and `manifests/rbac/kubevirt_config_role.yaml` (the
/// kubeconfig Secrets in the operator's namespace only).
fn least_privileged(management: Fixture) -> Fixture {
    let read = |path: &str| std::fs::read_to_string(repo(path)).expect(path);
    let cluster_role: ClusterRole =
        serde_yaml::from_str(&read("manifests/rbac/cluster_role.yaml")).expect("ClusterRole");
    let rules: Vec<PolicyRule> = (cluster_role.rules.unwrap_or_default().into_iter())
        .filter(|r| {
            r.resources
                .iter()
                .flatten()
                .any(|res| res.starts_with("kubevirtconfigs"))
        })
        .collect();
    assert_eq!(rules.len(), 2, "{rules:?}");
    let role: Role =
        serde_yaml::from_str(&read("manifests/rbac/kubevirt_config_role.yaml")).expect("Role");
    assert_eq!(role.namespace().as_deref(), Some(OPERATOR_NAMESPACE));
    management
        .user(CONTROLLER, &[])
        .grant_cluster(CONTROLLER, rules)
        .grant(
            OPERATOR_NAMESPACE,
            CONTROLLER,
            role.rules.unwrap_or_default(),
        )
}

fn ready(registry: &Registry, name: &str) -> Arc<clusters::Connection> {
    match registry.get(name) {
        Some(Health::Ready(c)) => c,
        other => panic!("{name} not ready in the registry: {other:?}"),
    }
}

/// The tests, by subject, in tests/clusters_e2e/ (still one test binary).
mod clusters_e2e {
    mod probes;
    mod remote_rbac;
}
