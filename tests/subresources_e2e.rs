//! Issue 34, the foundation: the operator's aggregated API `subresources.vitistack.io`, registered
//! with a real kube-apiserver (front-proxy certificates, an APIService for the operator's
//! listener), reached only through kube-apiserver and authorized there on the Machine; power
//! buttons relayed to a played virt-api (APIService `v1.subresources.kubevirt.io`) on the
//! Machine's cluster, the operator's own and a remote one (KubevirtConfig dc1).

mod aggregated;
mod kubevirt;
mod support;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::Role;
use kube::Client;
use kube::api::{Api, PostParams};

use kubevirt_operator::api::{KubevirtConfig, Machine};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

use aggregated::{Env, GROUP, VERSION, WAIT, direct, machine_with_vmi, start};
use support::aggregation::FRONT_PROXY_NAME;
use support::operator::OPERATOR_USER;
use support::virt_api::{Call, PlayedVirtApi};
use support::{Fixture, OPERATOR_NAMESPACE, Started, events_about, eventually};

/// The pause command of docs/user/console-and-power.md (team-a's vm-1).
fn documented_pause() -> String {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/user/console-and-power.md"),
    )
    .expect("the page");
    page.lines()
        .find(|l| l.contains("kubectl replace --raw") && l.contains("/pause"))
        .expect("a documented pause command")
        .to_owned()
}

/// Runs `line` with sh, the test's kubectl first on PATH, as the fixture's user `user` (without
/// blocking the runtime: the played virt-api answers on it).
async fn kubectl_as(env: &Started, user: &str, line: &str) -> std::process::Output {
    let kubectl = support::kubectl_path().expect("kubectl");
    let path = format!(
        "{}:{}",
        kubectl.parent().expect("kubectl's directory").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubeconfig = env
        .write_kubeconfig(env.user(user), None)
        .expect("kubeconfig");
    tokio::process::Command::new("sh")
        .args(["-c", line])
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .await
        .expect("sh")
}

fn pause_path(ns: &str, machine: &str) -> String {
    format!("/apis/{GROUP}/{VERSION}/namespaces/{ns}/machines/{machine}/pause")
}

/// The HTTP status kube-apiserver answers `client`'s PUT of `path` with.
async fn put_status(client: &Client, path: &str) -> u16 {
    let request = http::Request::put(path)
        .header("Content-Type", "application/json")
        .body(b"{}".to_vec())
        .expect("request");
    match client.request_text(request).await {
        Ok(_) => 200,
        Err(kube::Error::Api(e)) => {
            eprintln!("PUT {path}: {} {}", e.code, e.message);
            e.code
        }
        Err(e) => panic!("PUT {path}: {e}"),
    }
}

#[tokio::test]
async fn only_kube_apiserver_reaches_the_aggregated_api_and_authorizes_on_the_machine() {
    let Env { env, port } = start(&[]).await;
    let alice = env.client_of("alice").await;

    // Discovery through kube-apiserver, as kubectl asks for it.
    let request = http::Request::get(format!("/apis/{GROUP}/{VERSION}"))
        .body(Vec::new())
        .expect("request");
    let list: serde_json::Value = alice.request(request).await.expect("discovery");
    assert_eq!(list["groupVersion"], format!("{GROUP}/{VERSION}"));

    // KubeVirt's subresource API on the VM's cluster (here the operator's own).
    let admin = env.admin_client().await;
    let virt_api = PlayedVirtApi::start(&admin, OPERATOR_NAMESPACE, "virt-api").await;
    machine_with_vmi(&admin, "team-a", "vm-1").await;
    machine_with_vmi(&admin, "team-b", "vm-1").await;

    // Authorized by kube-apiserver on machines/pause in the Machine's namespace: team-a's
    // Machine is paused, relayed with the operator's credentials; team-b's and a user without
    // the Role never reach the operator.
    let pause = documented_pause();
    let out = kubectl_as(&env, "alice", &pause).await;
    assert!(out.status.success(), "{pause}: {out:?}");
    let paused = vec![Call {
        target: "team-a/vm-1/pause".to_owned(),
        user: OPERATOR_USER.to_owned(),
    }];
    assert_eq!(virt_api.calls(), paused);
    assert_eq!(put_status(&alice, &pause_path("team-b", "vm-1")).await, 403);
    let nobody = env.client_of(OPERATOR_USER).await;
    assert_eq!(
        put_status(&nobody, &pause_path("team-a", "vm-1")).await,
        403,
        "no Role"
    );
    assert_eq!(virt_api.calls(), paused, "nothing more relayed");
    let events = eventually(WAIT, "the Paused Event", || async {
        let events = events_about(&admin, "team-a", "vm-1").await;
        events.into_iter().find(|(_, reason, _)| reason == "Paused")
    })
    .await;
    assert!(events.2.contains("by alice"), "{events:?}");

    // Directly on the operator's port: only the front proxy's certificate completes the
    // handshake, and even then a request naming no user is refused.
    let url = |path: &str| format!("https://127.0.0.1:{port}{path}");
    let alice_cert = {
        let user = env.user("alice");
        (user.cert_pem.clone(), user.key_pem.clone())
    };
    let forged = env.mint_front_proxy("alice").expect("forged front proxy");
    for (who, identity) in [
        ("no certificate", None),
        ("a user's certificate", Some(&alice_cert)),
        ("the front-proxy CA, another name", Some(&forged)),
    ] {
        let answer = direct(identity)
            .put(url(&pause_path("team-a", "vm-1")))
            .send()
            .await;
        assert!(answer.is_err(), "{who}: {answer:?}");
    }
    let front_proxy = env.front_proxy_identity().expect("front proxy identity");
    assert_eq!(FRONT_PROXY_NAME, "front-proxy-client");
    let anonymous = direct(Some(&front_proxy))
        .put(url(&pause_path("team-a", "vm-1")))
        .body("{}")
        .send()
        .await
        .expect("answered");
    assert_eq!(anonymous.status(), 401, "no X-Remote-User");
    let console = format!("/apis/{GROUP}/{VERSION}/namespaces/team-a/machines/vm-1/console");
    let named = direct(Some(&front_proxy))
        .put(url(&console))
        .header("X-Remote-User", "alice")
        .body("{}")
        .send()
        .await
        .expect("answered");
    assert_eq!(named.status(), 404, "a user, and console not served yet");
    assert_eq!(virt_api.calls(), paused, "nothing relayed directly");
}

/// The KubevirtConfig `dc1` for `remote`, with its admin's token (the remote RBAC is
/// `tests/clusters_e2e.rs`'s), and the operator's rights to read its Secret.
async fn dc1(admin: &Client, remote: &Started) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_machine_is_paused_on_its_cluster() {
    let (Env { env, .. }, remote) = tokio::join!(
        start(&["--kubevirt-config-probe-interval", "1s"]),
        // No team-a there: the operator makes it (one it did not make is refused).
        Fixture::new().with_fixture_crds().start()
    );
    let admin = env.admin_client().await;
    let far_admin = remote.admin_client().await;
    let virt_api = PlayedVirtApi::start(&far_admin, OPERATOR_NAMESPACE, "virt-api").await;
    dc1(&admin, &remote).await;

    let machines = Api::<Machine>::namespaced(admin.clone(), "team-a");
    let m: Machine = serde_json::from_value(serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": { "name": "far", "annotations": { "vitistack.io/kubevirt-config": "dc1" } },
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
        if let (Ok(m), Ok(mut seen)) = (machines.get("far").await, seen.lock()) {
            *seen = format!("{:?}", m.status.map(|s| s.conditions));
        }
        far_vms.get_opt("far").await.ok().flatten()
    })
    .await;
    kubevirt::vmi(
        &far_admin,
        "team-a",
        "far",
        serde_json::json!({ "phase": "Running" }),
    )
    .await;
    support::eventually_with(
        WAIT,
        "the remote VMI in the Machine's status",
        log,
        || async {
            let status = machines.get("far").await.ok()?.status?;
            (status.vmi_name.as_deref() == Some("far") && status.cluster.as_deref() == Some("dc1"))
                .then_some(())
        },
    )
    .await;

    let alice = env.client_of("alice").await;
    assert_eq!(put_status(&alice, &pause_path("team-a", "far")).await, 200);
    let calls = virt_api.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].target, "team-a/far/pause");
    assert_eq!(
        calls[0].user, "admin-token",
        "the operator's credentials for dc1"
    );
}
