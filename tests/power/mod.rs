//! power_e2e's set-up on top of `tests/aggregated/` (the aggregated API registered through a
//! real kube-apiserver): the operator's KubeVirt rights as `manifests/subresources` grants them,
//! users chosen by the test, Machines with a played VMI on the operator's cluster and on a
//! remote one (KubevirtConfig dc1), and PUTs as the fixture's users.

#![allow(dead_code)] // Not every test binary uses every helper.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::Client;
use kube::api::{Api, PostParams};

use kubevirt_operator::api::{KubevirtConfig, Machine};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

use crate::aggregated::let_operator_read_front_proxy_ca;
pub use crate::aggregated::{Env, GROUP, VERSION, WAIT, direct};
use crate::kubevirt;
use crate::support::aggregation::register_api_service;
use crate::support::operator::{OPERATOR_USER, SUBRESOURCES_SERVICE};
use crate::support::{self, Fixture, OPERATOR_NAMESPACE, Started, eventually, free_port};

/// The operator's rights on KubeVirt's subresources and VMIs, as `manifests/subresources/rbac.yaml`
/// grants them on its own cluster (and the remote-cluster RBAC on a remote one).
pub async fn grant_kubevirt_subresources(admin: &Client, user: &str) {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/subresources/rbac.yaml"),
    )
    .expect("manifests/subresources/rbac.yaml");
    let role: ClusterRole = text
        .split("\n---\n")
        .filter_map(|doc| serde_yaml::from_str::<ClusterRole>(doc).ok())
        .find(|r| r.metadata.name.as_deref() == Some("kubevirt-operator-subresources"))
        .expect("the ClusterRole kubevirt-operator-subresources");
    let kubevirt: Vec<_> = role
        .rules
        .unwrap_or_default()
        .into_iter()
        .filter(|r| {
            r.api_groups
                .iter()
                .flatten()
                .any(|g| g.ends_with("kubevirt.io"))
        })
        .collect();
    assert_eq!(
        kubevirt.len(),
        2,
        "KubeVirt's subresources and VMIs in the manifest"
    );
    support::rbac::grant_cluster_role(admin, "vmi-power", user, kubevirt).await;
}

/// Once Machine `ns/name`'s VM is there: its VMI played running, and recorded in its status.
pub async fn vmi_running(admin: &Client, ns: &str, name: &str) {
    let machines = Api::<Machine>::namespaced(admin.clone(), ns);
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

/// The operator with its aggregated API on a free port, registered as the APIService, with the
/// namespaces team-a and team-b and the users and grants `users` adds.
pub async fn start(extra: &[&str], users: impl FnOnce(Fixture) -> Fixture) -> Env {
    let port = free_port().expect("port");
    let listen = format!("127.0.0.1:{port}");
    let fixture = Fixture::new()
        .with_all_crds()
        .namespace("team-a")
        .namespace("team-b");
    let env = users(fixture)
        .operator(
            "aggregated",
            &[&["--subresources-listen", listen.as_str()], extra].concat(),
        )
        .start()
        .await;
    let admin = env.admin_client().await;
    let_operator_read_front_proxy_ca(&admin).await;
    // What the remote-cluster RBAC grants on a VM's cluster, here the operator's own.
    grant_kubevirt_subresources(&admin, OPERATOR_USER).await;
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

/// The path of `machines/<machine>/<subresource>` in `ns`.
pub fn machine_path(ns: &str, machine: &str, subresource: &str) -> String {
    format!("/apis/{GROUP}/{VERSION}/namespaces/{ns}/machines/{machine}/{subresource}")
}

/// The HTTP status and message kube-apiserver answers `client`'s PUT of `path` with `body`.
pub async fn put_with(client: &Client, path: &str, body: &str) -> (u16, String) {
    let request = http::Request::put(path)
        .header("Content-Type", "application/json")
        .body(body.as_bytes().to_vec())
        .expect("request");
    match client.request_text(request).await {
        Ok(_) => (200, String::new()),
        Err(kube::Error::Api(e)) => {
            eprintln!("PUT {path}: {} {}", e.code, e.message);
            (e.code, e.message)
        }
        Err(e) => panic!("PUT {path}: {e}"),
    }
}

/// The HTTP status kube-apiserver answers `client`'s PUT of `path` (body `{}`) with.
pub async fn put_status(client: &Client, path: &str) -> u16 {
    put_with(client, path, "{}").await.0
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
    support::rbac::grant_role(
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

/// Machine `team-a/name` placed on dc1 (`remote`), its VMI played running there and recorded.
pub async fn remote_machine_with_vmi(env: &Started, remote: &Started, name: &str) {
    let admin = env.admin_client().await;
    let far_admin = remote.admin_client().await;
    let machines = Api::<Machine>::namespaced(admin.clone(), "team-a");
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
    let far_vms = Api::<VirtualMachine>::namespaced(far_admin.clone(), "team-a");
    let seen = std::sync::Mutex::new(String::new());
    let log = || {
        let status = seen.lock().map(|s| s.clone()).unwrap_or_default();
        format!("Machine status: {status}\n{}", env.operator().log_tail())
    };
    support::eventually_with(WAIT, "the Machine's VM on dc1", log, || async {
        if let (Ok(m), Ok(mut seen)) = (machines.get(name).await, seen.lock()) {
            *seen = format!("{:?}", m.status.map(|s| s.conditions));
        }
        far_vms.get_opt(name).await.ok().flatten()
    })
    .await;
    kubevirt::vmi(
        &far_admin,
        "team-a",
        name,
        serde_json::json!({ "phase": "Running" }),
    )
    .await;
    support::eventually_with(
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
