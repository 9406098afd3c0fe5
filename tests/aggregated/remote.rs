//! The remote cluster dc1 of the aggregated API's tests: its KubevirtConfig and a Machine on it
//! with a running VMI there (KubeVirt played on dc1).

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::Role;
use kube::Client;
use kube::api::{Api, PostParams};

use kubevirt_operator::api::{KubevirtConfig, Machine};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

use super::WAIT;
use crate::kubevirt;
use crate::support::operator::OPERATOR_USER;
use crate::support::virt_api::PlayedVirtApi;
use crate::support::{OPERATOR_NAMESPACE, Started};

/// `remote` as dc1 of the operator of `env`, a virt-api played there, and Machine `team-a/far`
/// on it with its VMI running there.
pub async fn far_machine(env: &Started, remote: &Started) -> PlayedVirtApi {
    let far_admin = remote.admin_client().await;
    let virt_api = PlayedVirtApi::start(&far_admin, OPERATOR_NAMESPACE, "virt-api").await;
    dc1(&env.admin_client().await, remote).await;
    remote_machine(env, remote, "team-a", "far").await;
    virt_api
}

/// The KubevirtConfig `dc1` for `remote`, with its admin's token (the remote RBAC is
/// `tests/clusters_e2e.rs`'s), and the operator's rights to read its Secret.
pub async fn dc1(admin: &Client, remote: &Started) {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(remote.ca_pem());
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: r, cluster: {{server: '{}', certificate-authority-data: {ca}}}}}]\nusers: [{{name: u, user: {{token: {}}}}}]\ncontexts: [{{name: r, context: {{cluster: r, user: u}}}}]\ncurrent-context: r\n",
        remote.server_url(),
        remote.admin_token()
    );
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "dc1-kubeconfig" }, "stringData": { "kubeconfig": kubeconfig },
    }))
    .expect("Secret");
    Api::<Secret>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .expect("kubeconfig Secret");
    let role: Role = serde_yaml::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("manifests/rbac/kubevirt_config_role.yaml"),
        )
        .expect("kubevirt_config_role.yaml"),
    )
    .expect("Role");
    crate::support::rbac::grant_role(
        admin,
        OPERATOR_NAMESPACE,
        "kubevirt-config",
        OPERATOR_USER,
        role.rules.unwrap_or_default(),
    )
    .await;
    let config: KubevirtConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": { "name": "dc1" },
        "spec": { "kubeconfigSecretRef": "dc1-kubeconfig", "secretNamespace": OPERATOR_NAMESPACE },
    }))
    .expect("KubevirtConfig");
    Api::<KubevirtConfig>::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("KubevirtConfig");
}

/// Machine `ns/name` on dc1 (`dc1` set up, the operator probing it) with a running VMI there,
/// once its status names that VMI on dc1.
pub async fn remote_machine(env: &Started, remote: &Started, ns: &str, name: &str) {
    let admin = env.admin_client().await;
    let far_admin = remote.admin_client().await;
    let machines = Api::<Machine>::namespaced(admin.clone(), ns);
    let m: Machine = serde_json::from_value(serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": { "name": name, "annotations": { "vitistack.io/kubevirt-config": "dc1" } },
        "spec": { "template": "small" },
    }))
    .expect("Machine");
    machines
        .create(&PostParams::default(), &m)
        .await
        .expect("create Machine");
    let far_vms = Api::<VirtualMachine>::namespaced(far_admin.clone(), ns);
    let seen = std::sync::Mutex::new(String::new());
    let log = || {
        let status = seen.lock().map(|s| s.clone()).unwrap_or_default();
        format!("Machine status: {status}\n{}", env.operator().log_tail())
    };
    crate::support::eventually_with(WAIT, "the Machine's VM on dc1", log, || async {
        if let (Ok(m), Ok(mut seen)) = (machines.get(name).await, seen.lock()) {
            *seen = format!("{:?}", m.status.map(|s| s.conditions));
        }
        far_vms.get_opt(name).await.ok().flatten()
    })
    .await;
    kubevirt::vmi(
        &far_admin,
        ns,
        name,
        serde_json::json!({ "phase": "Running" }),
    )
    .await;
    crate::support::eventually_with(
        WAIT,
        "the remote VMI in the Machine's status",
        log,
        || async {
            let status = machines.get(name).await.ok()?.status?;
            (status.vmi_name.as_deref() == Some(name) && status.cluster.as_deref() == Some("dc1"))
                .then_some(())
        },
    )
    .await;
}
