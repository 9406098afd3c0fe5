//! `kubectl machine` (issue 34), the binary run as kubectl runs a plugin (`kubectl-machine` on
//! PATH, a symlink to the operator's binary) with a user's kubeconfig:
//!
//! - on a real control plane, through kube-apiserver to the operator's aggregated API and on
//!   to a played virt-api: the buttons reach KubeVirt as the operator, the user's context,
//!   namespace and kubeconfig flags are followed, a user without the right exits 1 with
//!   kube-apiserver's 403, an unknown Machine with the operator's 404;
//! - the console and VNC through the binary against an in-process WebSocket server on loopback
//!   that speaks KubeVirt's console protocol (the plugin's protocol, end to end in the binary;
//!   the operator's own console relay is tested where it is served).

mod aggregated;
mod kubevirt;
mod support;

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

use aggregated::plugin::{installed_plugin, kubectl_machine};
use aggregated::{GROUP, WAIT, machine_with_vmi, start_with};
use support::operator::OPERATOR_USER;
use support::rbac::rule;
use support::virt_api::PlayedVirtApi;
use support::{OPERATOR_NAMESPACE, events_about, eventually};

/// One kubeconfig with two contexts on `env`'s API server: `bob` (current) and `alice`,
/// both in team-a.
fn two_contexts(env: &support::Started, bob: &support::User) -> String {
    let parse =
        |yaml: String| -> serde_json::Value { serde_yaml::from_str(&yaml).expect("kubeconfig") };
    let alice = parse(
        env.kubeconfig_yaml(env.user("alice"), None)
            .expect("alice's"),
    );
    let bobs = parse(env.kubeconfig_yaml(bob, None).expect("bob's"));
    let context = |name: &str| {
        serde_json::json!({ "name": name, "context": {
            "cluster": "control-plane", "user": name, "namespace": "team-a" } })
    };
    let merged = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": alice["clusters"],
        "users": [bobs["users"][0], alice["users"][0]],
        "contexts": [context("bob"), context("alice")],
        "current-context": "bob",
    });
    serde_yaml::to_string(&merged).expect("kubeconfig YAML")
}

#[tokio::test]
async fn kubectl_machine_presses_the_buttons_as_the_user_in_their_namespace() {
    let buttons = ["pause", "unpause", "softreboot"]
        .map(|sub| rule(GROUP, &format!("machines/{sub}"), &["update"]));
    let aggregated::Env { env, .. } = start_with(&[], buttons.to_vec()).await;
    let admin = env.admin_client().await;
    let virt_api = PlayedVirtApi::start(&admin, OPERATOR_NAMESPACE, "virt-api").await;
    machine_with_vmi(&admin, "team-a", "vm-1").await;
    let bob = env.mint_user("bob", &[]).expect("bob");
    let dir = env.dir().join("plugin");
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig_file = dir.join("kubeconfig");
    std::fs::write(&kubeconfig_file, two_contexts(&env, &bob)).expect("kubeconfig");
    let kubeconfig = Some(kubeconfig_file.as_path());

    // alice's context: its namespace is team-a; then -n and --kubeconfig as kubectl takes them.
    let out = kubectl_machine(
        &dir,
        kubeconfig,
        &["--context", "alice", "pause", "vm-1"],
        b"",
    )
    .await;
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Machine team-a/vm-1: pause accepted\n"
    );
    let out = kubectl_machine(
        &dir,
        kubeconfig,
        &["unpause", "vm-1", "-n", "team-a", "--context", "alice"],
        b"",
    )
    .await;
    assert!(out.status.success());
    let flag = kubeconfig_file.to_str().expect("UTF-8");
    let softreboot = [
        "softreboot",
        "vm-1",
        "--kubeconfig",
        flag,
        "--context=alice",
        "--namespace",
        "team-a",
    ];
    assert!(
        kubectl_machine(&dir, None, &softreboot, b"")
            .await
            .status
            .success()
    );
    let targets: Vec<(String, String)> = virt_api
        .calls()
        .into_iter()
        .map(|c| (c.target, c.user))
        .collect();
    let relayed = ["pause", "unpause", "softreboot"]
        .map(|sub| (format!("team-a/vm-1/{sub}"), OPERATOR_USER.to_owned()));
    assert_eq!(targets, relayed, "each relayed once, as the operator");
    let paused = eventually(WAIT, "the Paused Event", || async {
        let events = events_about(&admin, "team-a", "vm-1").await;
        events.into_iter().find(|(_, reason, _)| reason == "Paused")
    })
    .await;
    assert!(paused.2.contains("by alice"), "{paused:?}");

    // bob (the current context) holds no right: kube-apiserver's 403, naming what is missing.
    let out = kubectl_machine(&dir, kubeconfig, &["pause", "vm-1"], b"").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("Error from server (Forbidden)"), "{stderr}");
    assert!(stderr.contains("User \"bob\" cannot update resource \"machines/pause\" in API group \"subresources.vitistack.io\" in the namespace \"team-a\""), "{stderr}");
    // alice in a namespace where she holds nothing: refused the same way.
    let out = kubectl_machine(
        &dir,
        kubeconfig,
        &["--context", "alice", "-n", "team-b", "pause", "vm-1"],
        b"",
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("(Forbidden)"));
    // An unknown Machine: the operator's 404.
    let out = kubectl_machine(
        &dir,
        kubeconfig,
        &["--context", "alice", "pause", "ghost"],
        b"",
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Error from server (NotFound): Machine team-a/ghost not found"),
        "{stderr}"
    );
    // Bad input never leaves the machine.
    let out = kubectl_machine(
        &dir,
        kubeconfig,
        &["--context", "alice", "pause", "../vm-1"],
        b"",
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    assert_eq!(virt_api.calls().len(), 3, "nothing more relayed");
}

/// What the in-process server saw: each upgrade's path and subprotocol.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A WebSocket server on loopback speaking KubeVirt's console protocol (answers
/// `plain.kubevirt.io`, echoes binary frames), as plain HTTP for a kubeconfig without TLS.
async fn echo_server() -> (SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen: Seen = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                // The shape of tungstenite's callback, large error and all.
                #[allow(clippy::result_large_err)]
                let check = move |request: &Request, mut response: Response| {
                    let protocol = request.headers().get("sec-websocket-protocol").cloned();
                    let shown = protocol
                        .as_ref()
                        .and_then(|p| p.to_str().ok())
                        .map(str::to_owned);
                    if let Ok(mut seen) = record.lock() {
                        seen.push((request.uri().path().to_owned(), shown));
                    }
                    if let Some(p) = protocol {
                        response.headers_mut().insert("sec-websocket-protocol", p);
                    }
                    Ok(response)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, check).await else {
                    return;
                };
                while let Some(Ok(frame)) = ws.next().await {
                    if let Message::Binary(data) = frame {
                        let _ = ws.send(Message::Binary(data)).await;
                    }
                }
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn console_and_vnc_relay_bytes_in_kubevirts_protocol() {
    let (addr, seen) = echo_server().await;
    let dir = tempfile::tempdir().expect("dir");
    let kubeconfig = dir.path().join("kubeconfig");
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://{addr}'}}}}]\n\
         users: [{{name: u, user: {{}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u, namespace: team-a}}}}]\n\
         current-context: c\n"
    );
    std::fs::write(&kubeconfig, yaml).expect("kubeconfig");
    let base = "/apis/subresources.vitistack.io/v1alpha1/namespaces/team-a/machines/vm-1";
    let plain = Some("plain.kubevirt.io".to_owned());

    // Piped input: sent as it is (the escape key too), echoed, and the session ends with it.
    let typed: &[u8] = b"root\r\n\x1d\x03\xff";
    let out = kubectl_machine(dir.path(), Some(&kubeconfig), &["console", "vm-1"], typed).await;
    assert!(out.status.success());
    assert_eq!(out.stdout, typed);
    assert_eq!(
        seen.lock().expect("seen").clone(),
        vec![(format!("{base}/console"), plain.clone())]
    );

    // VNC: a local port, each viewer relayed on a stream of its own.
    let mut vnc = tokio::process::Command::new(installed_plugin(dir.path()))
        .args(["vnc", "vm-1", "--proxy-only"])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl-machine vnc");
    let mut lines = tokio::io::BufReader::new(vnc.stdout.take().expect("stdout")).lines();
    let first = lines.next_line().await.expect("read").expect("the port");
    let port: serde_json::Value = serde_json::from_str(&first).expect("JSON");
    let port = port["port"].as_u64().expect("a port");
    for viewer in [&b"RFB 003.008\n"[..], b"second viewer"] {
        let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port as u16))
            .await
            .expect("connect to the local port");
        tcp.write_all(viewer).await.expect("write");
        let mut echoed = vec![0; viewer.len()];
        tcp.read_exact(&mut echoed).await.expect("echoed");
        assert_eq!(echoed, viewer);
    }
    vnc.kill().await.expect("stop kubectl-machine vnc");
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        seen[1..]
            .iter()
            .all(|s| *s == (format!("{base}/vnc"), plain.clone())),
        "{seen:?}"
    );
}
