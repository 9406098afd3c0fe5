//! The operator's aggregated API `subresources.vitistack.io` on a test control plane (issue
//! 34), shared by the tests of its buttons and consoles: the operator listening on a free port
//! and registered as the APIService, Machines with running VMIs (KubeVirt played), and the
//! remote cluster `dc1`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};

use kubevirt_operator::api::{KubevirtConfig, Machine};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

use super::aggregation::register_api_service;
use super::operator::{OPERATOR_USER, SUBRESOURCES_SERVICE};
use super::rbac::rule;
use super::{Fixture, OPERATOR_NAMESPACE, Started, eventually};

// KubeVirt played as the e2e tests play it; a test crate that loads it too has its own copy.
#[allow(clippy::duplicate_mod)]
#[path = "../kubevirt/mod.rs"]
mod kubevirt;

pub const GROUP: &str = "subresources.vitistack.io";
pub const VERSION: &str = "v1alpha1";
pub const WAIT: Duration = Duration::from_secs(60);

/// The operator may read the front proxy's CA as every aggregated server does: kube-system's
/// built-in Role `extension-apiserver-authentication-reader`.
async fn let_operator_read_front_proxy_ca(admin: &Client) {
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "kubevirt-operator-auth-reader", "namespace": "kube-system" },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "extension-apiserver-authentication-reader",
        },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OPERATOR_USER }],
    }))
    .expect("RoleBinding");
    Api::<RoleBinding>::namespaced(admin.clone(), "kube-system")
        .create(&PostParams::default(), &binding)
        .await
        .expect("auth reader binding");
}

/// An HTTPS client of the operator's port directly, presenting `identity` (certificate and key
/// PEM) if any. The operator's own certificate is not checked: the caller is what is tested.
pub fn direct(identity: Option<&(String, String)>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .danger_accept_invalid_certs(true)
        .http1_only()
        .no_proxy()
        .timeout(Duration::from_secs(5));
    if let Some((cert, key)) = identity {
        let pem = format!("{cert}{key}");
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"));
    }
    builder.build().expect("client")
}

pub struct Env {
    pub env: Started,
    /// The operator's aggregated API port.
    pub port: u16,
}

/// Machine `ns/name` with a running VMI `name`, KubeVirt played (the reconciler records it).
pub async fn machine_with_vmi(admin: &Client, ns: &str, name: &str) {
    let machines = Api::<Machine>::namespaced(admin.clone(), ns);
    let m: Machine = serde_json::from_value(serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": { "name": name }, "spec": { "template": "small" },
    }))
    .expect("Machine");
    machines
        .create(&PostParams::default(), &m)
        .await
        .expect("create Machine");
    let vms = Api::<VirtualMachine>::namespaced(admin.clone(), ns);
    eventually(WAIT, "the Machine's VM", || async {
        vms.get_opt(name).await.ok().flatten()
    })
    .await;
    kubevirt::vmi(admin, ns, name, serde_json::json!({ "phase": "Running" })).await;
    eventually(WAIT, "the Machine's status to name its VMI", || async {
        let m = machines.get(name).await.ok()?;
        (m.status?.vmi_name.as_deref() == Some(name)).then_some(())
    })
    .await;
}

/// The operator of `fixture` (its namespaces, users and grants) with its aggregated API on a
/// free port and `extra` flags, registered as the APIService; the operator holds KubeVirt's
/// subresource rights `vmi_rights` (e.g. `virtualmachineinstances/pause`, verb) on its own
/// cluster, as the remote-cluster RBAC grants them on a VM's cluster.
pub async fn start(fixture: Fixture, extra: &[&str], vmi_rights: &[(&str, &str)]) -> Env {
    let port = super::free_port().expect("port");
    let listen = format!("127.0.0.1:{port}");
    let env = fixture
        .operator(
            "aggregated",
            &[&["--subresources-listen", listen.as_str()], extra].concat(),
        )
        .start()
        .await;
    let admin = env.admin_client().await;
    let_operator_read_front_proxy_ca(&admin).await;
    let rules = vmi_rights.iter().map(|(sub, verb)| {
        rule(
            "subresources.kubevirt.io",
            &format!("virtualmachineinstances/{sub}"),
            &[verb],
        )
    });
    super::rbac::grant_cluster_role(&admin, "vmi-subresources", OPERATOR_USER, rules.collect())
        .await;
    // Registered once the operator lets the front proxy in, so kube-apiserver's first
    // availability check passes.
    let front_proxy = env.front_proxy_identity().expect("front proxy identity");
    let discovery = format!("https://127.0.0.1:{port}/apis/{GROUP}/{VERSION}");
    eventually(WAIT, "the operator lets the front proxy in", || async {
        let answer = direct(Some(&front_proxy))
            .get(&discovery)
            .send()
            .await
            .ok()?;
        answer.status().is_success().then_some(())
    })
    .await;
    let ca = env.operator().serving_cert_pem();
    register_api_service(
        &admin,
        (GROUP, VERSION),
        (OPERATOR_NAMESPACE, SUBRESOURCES_SERVICE),
        port,
        &ca,
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", env.operator().log_tail()));
    Env { env, port }
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
    super::rbac::grant_role(
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
    super::eventually_with(WAIT, "the Machine's VM on dc1", log, || async {
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
    super::eventually_with(
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
