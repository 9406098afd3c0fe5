//! Issue 34, the foundation: the operator's aggregated API `subresources.vitistack.io`, registered
//! with a real kube-apiserver (front-proxy certificates, an APIService for the operator's
//! listener), reached only through kube-apiserver and authorized there on the Machine; power
//! buttons relayed to a played virt-api (APIService `v1.subresources.kubevirt.io`) on the
//! Machine's cluster, the operator's own and a remote one (KubevirtConfig dc1).

mod aggregated;
mod kubevirt;
mod support;

use aggregated::remote::far_machine;
use aggregated::{
    Env, GROUP, VERSION, WAIT, direct, machine_path, machine_with_vmi, put_status, start,
};
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
    machine_path(ns, machine, "pause")
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
        body: "{}".to_owned(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_machine_is_paused_on_its_cluster() {
    let (Env { env, .. }, remote) = tokio::join!(
        start(&["--kubevirt-config-probe-interval", "1s"]),
        // No team-a there: the operator makes it (one it did not make is refused).
        Fixture::new().with_fixture_crds().start()
    );
    let virt_api = far_machine(&env, &remote).await;

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
