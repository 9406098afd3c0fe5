//! The set-up of issue 34's tests, shared by every crate that tests the aggregated API
//! `subresources.vitistack.io` (`subresources_e2e`, `power_e2e`, `console_e2e`, `plugin_e2e`):
//! the operator with its aggregated API registered through a real kube-apiserver, Machines with
//! a running VMI (KubeVirt played), PUTs of the buttons, and the remote cluster dc1
//! ([`remote`]). A test crate that uses it declares `mod aggregated; mod kubevirt; mod
//! support;` (the VMI is written by `kubevirt`, which `support` is compiled without).
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};

use kubevirt_operator::api::Machine;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

use crate::kubevirt;
use crate::support::aggregation::register_api_service;
use crate::support::operator::{OPERATOR_USER, SUBRESOURCES_SERVICE};
use crate::support::rbac::rule;
use crate::support::{Fixture, OPERATOR_NAMESPACE, Started, eventually, free_port};

pub mod plugin;
pub mod remote;

pub const GROUP: &str = "subresources.vitistack.io";
pub const VERSION: &str = "v1alpha1";
pub const WAIT: Duration = Duration::from_secs(60);

/// The operator may read the front proxy's CA as every aggregated server does: kube-system's
/// built-in Role `extension-apiserver-authentication-reader`.
pub async fn let_operator_read_front_proxy_ca(admin: &Client) {
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
    vmi_running(admin, ns, name).await;
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

/// Rules on KubeVirt's subresources of VMIs (`(subresource, verb)`), as the operator needs them.
pub fn vmi_rules(rights: &[(&str, &str)]) -> Vec<PolicyRule> {
    (rights.iter())
        .map(|(sub, verb)| {
            rule(
                "subresources.kubevirt.io",
                &format!("virtualmachineinstances/{sub}"),
                &[verb],
            )
        })
        .collect()
}

/// [`start_with`]: alice may pause Machines in team-a only.
pub async fn start(extra: &[&str]) -> Env {
    start_with(extra, vec![rule(GROUP, "machines/pause", &["update"])]).await
}

/// The operator with its aggregated API on a free port, registered as the APIService; alice
/// holds `alice_rules` in team-a (and nothing in team-b); the operator may pause, unpause and
/// soft-reboot VMIs.
pub async fn start_with(extra: &[&str], alice_rules: Vec<PolicyRule>) -> Env {
    let fixture = teams()
        .user("alice", &[])
        .grant("team-a", "alice", alice_rules);
    let power = [
        ("pause", "update"),
        ("unpause", "update"),
        ("softreboot", "update"),
    ];
    start_fixture(fixture, extra, vmi_rules(&power)).await
}

/// The namespaces team-a and team-b, every CRD installed.
pub fn teams() -> Fixture {
    Fixture::new()
        .with_all_crds()
        .namespace("team-a")
        .namespace("team-b")
}

/// The operator of `fixture` (its namespaces, users and grants) with its aggregated API on a
/// free port and `extra` flags, registered as the APIService; the operator holds `kubevirt`
/// (KubeVirt's rights) on its own cluster, as the remote-cluster RBAC grants them on a VM's.
pub async fn start_fixture(fixture: Fixture, extra: &[&str], kubevirt: Vec<PolicyRule>) -> Env {
    let port = free_port().expect("port");
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
    crate::support::rbac::grant_cluster_role(&admin, "vmi-power", OPERATOR_USER, kubevirt).await;
    // Registered once the operator lets the front proxy in, so kube-apiserver's first
    // availability check passes. The operator started before it could read the front proxy's
    // CA, so it reads it on its watcher's retry, whose backoff grows: on a busy machine that
    // took over 60 s once (CI), hence the longer bound for this state.
    let front_proxy = env.front_proxy_identity().expect("front proxy identity");
    let discovery = format!("https://127.0.0.1:{port}/apis/{GROUP}/{VERSION}");
    let bound = Duration::from_secs(180);
    eventually(bound, "the operator lets the front proxy in", || async {
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
