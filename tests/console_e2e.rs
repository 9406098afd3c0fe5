//! Issue 34, consoles: a Machine's serial console and VNC through the operator's aggregated API
//! (`machines/console`, `machines/vnc`: WebSockets, subprotocol `plain.kubevirt.io`) on a real
//! kube-apiserver, relayed to a played virt-api (APIService `v1.subresources.kubevirt.io`) on
//! the Machine's cluster, here the remote dc1 and the operator's own; authorized by kube-apiserver
//! on the Machine, and bounded by the session limits, which end sessions and count them.

mod aggregated;
mod kubevirt;
mod support;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kube::api::{Api, DeleteParams};
use kubevirt_operator::subresources::upstream::{PROTOCOL, Socket};
use tokio_tungstenite::tungstenite::Message;

use aggregated::plugin::kubectl_machine_until;
use aggregated::remote::far_machine;
use aggregated::{Env, GROUP, VERSION, WAIT, direct, machine_with_vmi, start_fixture, vmi_rules};
use support::console_client::{
    closed, closed_while_busy, open, refused_with, round_trip, scrape, user_client,
};
use support::operator::OPERATOR_USER;
use support::rbac::rule;
use support::virt_api::PlayedVirtApi;
use support::{Fixture, OPERATOR_NAMESPACE, eventually, free_port};

/// What the operator needs on a VM's cluster for consoles (the remote RBAC grants the same).
const CONSOLE_RIGHTS: [(&str, &str); 2] = [("console", "get"), ("vnc", "get")];

fn stream_path(ns: &str, machine: &str, kind: &str) -> String {
    format!("/apis/{GROUP}/{VERSION}/namespaces/{ns}/machines/{machine}/{kind}")
}

/// team-a and team-b; alice may open consoles in team-a, bob may only pause there.
fn fixture() -> Fixture {
    aggregated::teams()
        .user("alice", &[])
        .user("bob", &[])
        .grant(
            "team-a",
            "alice",
            vec![
                rule(GROUP, "machines/console", &["get"]),
                rule(GROUP, "machines/vnc", &["get"]),
            ],
        )
        .grant(
            "team-b",
            "alice",
            vec![rule(GROUP, "machines/pause", &["update"])],
        )
        .grant(
            "team-a",
            "bob",
            vec![rule(GROUP, "machines/pause", &["update"])],
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_machines_console_round_trips_and_only_its_namespaces_users_reach_it() {
    let (Env { env, port }, remote) = tokio::join!(
        start_fixture(
            fixture(),
            &["--kubevirt-config-probe-interval", "1s"],
            vmi_rules(&CONSOLE_RIGHTS)
        ),
        Fixture::new().with_fixture_crds().start()
    );
    let admin = env.admin_client().await;
    let virt_api = far_machine(&env, &remote).await;
    machine_with_vmi(&admin, "team-b", "vm-1").await;

    // Alice, with machines/console in team-a, reaches the remote VM's serial console through
    // kube-apiserver and the operator; bytes come back as the guest echoed them.
    let alice = user_client(&env, "alice").await;
    let mut console = open(&alice, &stream_path("team-a", "far", "console"))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", env.operator().log_tail()));
    assert_eq!(round_trip(&mut console, b"root\r").await, b"root\r");
    let all_bytes: Vec<u8> = (0..=255).collect();
    assert_eq!(round_trip(&mut console, &all_bytes).await, all_bytes);
    let mut vnc = open(&alice, &stream_path("team-a", "far", "vnc"))
        .await
        .expect("vnc");
    assert_eq!(
        round_trip(&mut vnc, b"RFB 003.008\n").await,
        b"RFB 003.008\n"
    );
    let calls = virt_api.calls();
    let targets: Vec<&str> = calls.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(targets, ["team-a/far/console", "team-a/far/vnc"], "on dc1");
    assert!(
        calls.iter().all(|c| c.user == "admin-token"),
        "the operator's credentials for dc1: {calls:?}"
    );

    // The same as a user runs it: `kubectl machine console` (the binary as kubectl-machine,
    // alice's kubeconfig, stdin piped): the guest's echo comes back on its stdout.
    let dir = env.dir().join("plugin");
    let kubeconfig = env
        .write_kubeconfig(env.user("alice"), None)
        .expect("alice's kubeconfig");
    let args = ["console", "far", "-n", "team-a"];
    let typed = b"uname -a\r";
    let (status, stdout) =
        kubectl_machine_until(&dir, Some(&kubeconfig), &args, typed, typed).await;
    assert!(status.success(), "{status}");
    assert_eq!(String::from_utf8_lossy(&stdout), "uname -a\r");
    let last = virt_api.calls().pop().map(|c| c.target);
    assert_eq!(
        last.as_deref(),
        Some("team-a/far/console"),
        "relayed to dc1"
    );

    // Refused by kube-apiserver: team-b's Machine (alice may only pause there), and bob, whose
    // Role in team-a lacks machines/console.
    let team_b = open(&alice, &stream_path("team-b", "vm-1", "console")).await;
    assert_eq!(refused_with(team_b), 403);
    let bob = user_client(&env, "bob").await;
    assert_eq!(
        refused_with(open(&bob, &stream_path("team-a", "far", "console")).await),
        403
    );
    assert_eq!(
        refused_with(open(&bob, &stream_path("team-a", "far", "vnc")).await),
        403
    );
    let nobody = user_client(&env, OPERATOR_USER).await;
    assert_eq!(
        refused_with(open(&nobody, &stream_path("team-a", "far", "console")).await),
        403,
        "the operator's own user has no Machine rights"
    );

    // The operator's port directly, with the upgrade: only the front proxy completes the
    // handshake, and then a request naming no user is refused.
    let url = format!(
        "https://127.0.0.1:{port}{}",
        stream_path("team-a", "far", "console")
    );
    let upgrade = |client: reqwest::Client| {
        client
            .get(&url)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("Sec-WebSocket-Protocol", PROTOCOL)
    };
    let alice_cert = {
        let user = env.user("alice");
        (user.cert_pem.clone(), user.key_pem.clone())
    };
    let relayed = virt_api.calls().len();
    let forged = env.mint_front_proxy("alice").expect("forged front proxy");
    for (who, identity) in [
        ("no certificate", None),
        ("a user's certificate", Some(&alice_cert)),
        ("the front-proxy CA, another name", Some(&forged)),
    ] {
        let answer = upgrade(direct(identity)).send().await;
        assert!(answer.is_err(), "{who}: {answer:?}");
    }
    let front_proxy = env.front_proxy_identity().expect("front proxy identity");
    let anonymous = upgrade(direct(Some(&front_proxy)))
        .send()
        .await
        .expect("answered");
    assert_eq!(anonymous.status(), 401, "no X-Remote-User");
    assert_eq!(virt_api.calls().len(), relayed, "nothing relayed directly");

    // The sessions outlive the listener's request deadline (10 s) and kube-apiserver's (60 s),
    // the console in use, VNC quiet.
    let opened = std::time::Instant::now();
    while opened.elapsed() < Duration::from_secs(65) {
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(round_trip(&mut console, b"\x1b[A").await, b"\x1b[A");
    }
    assert_eq!(round_trip(&mut vnc, b"\x03").await, b"\x03");

    // The operator shuts down: each session is told so (1001, going away) and ends.
    env.operator().terminate();
    assert_eq!(
        closed(&mut console, WAIT).await,
        (1001, "draining".to_owned())
    );
    assert_eq!(closed(&mut vnc, WAIT).await, (1001, "draining".to_owned()));
}

#[tokio::test]
async fn session_limits_refuse_and_idle_sessions_end_counted_in_metrics() {
    let metrics = free_port().expect("port");
    let metrics_listen = format!("127.0.0.1:{metrics}");
    let flags = [
        "--console-max-sessions-per-user",
        "1",
        "--console-idle-timeout",
        "10s",
        "--metrics-bind-address",
        metrics_listen.as_str(),
    ];
    let Env { env, .. } = start_fixture(fixture(), &flags, vmi_rules(&CONSOLE_RIGHTS)).await;
    let admin = env.admin_client().await;
    let virt_api = PlayedVirtApi::start(&admin, OPERATOR_NAMESPACE, "virt-api").await;
    machine_with_vmi(&admin, "team-a", "vm-1").await;
    machine_with_vmi(&admin, "team-a", "vm-2").await;
    let alice = user_client(&env, "alice").await;
    let path = stream_path("team-a", "vm-1", "console");

    // Her one session opens; a second is refused (429) and counted, none relayed.
    let mut first = open(&alice, &path)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", env.operator().log_tail()));
    assert_eq!(round_trip(&mut first, b"ls\r").await, b"ls\r");
    let second = open(&alice, &path).await;
    if second.is_ok() {
        panic!("a second session opened:\n{}", env.operator().log_tail());
    }
    assert_eq!(refused_with(second), 429);
    assert_eq!(virt_api.calls().len(), 1);
    let text = scrape(metrics).await;
    assert!(
        text.contains("kubevirt_operator_console_sessions_refused_total{kind=\"console\",reason=\"user_cap\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("kubevirt_operator_console_sessions{kind=\"console\"} 1"),
        "{text}"
    );

    // Left idle, it ends with a close frame naming why, and is counted.
    assert_eq!(
        closed(&mut first, WAIT).await,
        (1000, "idle_timeout".to_owned())
    );
    eventually(WAIT, "the idle end counted", || async {
        let text = scrape(metrics).await;
        let ended = "kubevirt_operator_console_sessions_ended_total{kind=\"console\",reason=\"idle_timeout\"} 1";
        (text.contains(ended) && text.contains("kubevirt_operator_console_sessions{kind=\"console\"} 0"))
            .then_some(())
    })
    .await;

    // Her place is given back; kept busy, the session ends when the VMI goes.
    let mut second = open(&alice, &path).await.expect("a place again");
    let vmis = Api::<kube::api::DynamicObject>::namespaced_with(
        admin.clone(),
        "team-a",
        &kube::api::ApiResource::erase::<
            kubevirt_operator::reconciler::apis::kubevirt::VirtualMachineInstance,
        >(&()),
    );
    vmis.delete("vm-1", &DeleteParams::default())
        .await
        .expect("delete VMI");
    let end = closed_while_busy(&mut second).await;
    assert_eq!(end, (1000, "vmi_gone".to_owned()));
    eventually(WAIT, "the VMI's end counted", || async {
        let text = scrape(metrics).await;
        text.contains("kubevirt_operator_console_sessions_ended_total{kind=\"console\",reason=\"vmi_gone\"} 1")
            .then_some(())
    })
    .await;

    // A session on VNC of another Machine ends when that Machine is deleted.
    let mut third = open(&alice, &stream_path("team-a", "vm-2", "vnc"))
        .await
        .expect("vm-2's VNC");
    Api::<kubevirt_operator::api::Machine>::namespaced(admin.clone(), "team-a")
        .delete("vm-2", &DeleteParams::default())
        .await
        .expect("delete Machine");
    assert_eq!(
        closed_while_busy(&mut third).await,
        (1000, "machine_deleted".to_owned())
    );
    eventually(WAIT, "the Machine's end counted", || async {
        let text = scrape(metrics).await;
        text.contains("kubevirt_operator_console_sessions_ended_total{kind=\"vnc\",reason=\"machine_deleted\"} 1")
            .then_some(())
    })
    .await;
}

/// Round-trip times of `n` small messages (sorted), and bytes per second echoed for `secs`
/// with 64 KiB messages, one in flight at a time per side (the echo's own pace).
async fn measure(socket: &mut Socket, n: usize, secs: u64) -> (Vec<Duration>, f64) {
    let mut rtts = Vec::with_capacity(n);
    for _ in 0..n {
        let start = std::time::Instant::now();
        round_trip(socket, b"0123456789abcdef").await;
        rtts.push(start.elapsed());
    }
    rtts.sort_unstable();
    let block = vec![0x5au8; 64 << 10];
    let (mut sent, mut echoed) = (0u64, 0u64);
    let start = std::time::Instant::now();
    // Four messages in flight keep both directions busy without unbounded queues.
    for _ in 0..4 {
        socket
            .send(Message::Binary(block.clone().into()))
            .await
            .expect("send");
        sent += block.len() as u64;
    }
    while start.elapsed() < Duration::from_secs(secs) {
        match socket.next().await {
            Some(Ok(Message::Binary(b))) => {
                echoed += b.len() as u64;
                socket
                    .send(Message::Binary(block.clone().into()))
                    .await
                    .expect("send");
                sent += block.len() as u64;
            }
            Some(Ok(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    let rate = echoed as f64 / start.elapsed().as_secs_f64();
    // The echoes still in flight are read, so the next measurement starts clean.
    while echoed < sent {
        match socket.next().await {
            Some(Ok(Message::Binary(b))) => echoed += b.len() as u64,
            Some(Ok(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    (rtts, rate)
}

/// docs/design/performance.md, "Console relay": a console through kube-apiserver and the
/// operator against one through kube-apiserver straight to the played virt-api, in one run.
/// `cargo test --release --test console_e2e -- --ignored --nocapture relay_cost`
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement; run by hand"]
async fn relay_cost() {
    let Env { env, .. } = start_fixture(fixture(), &[], vmi_rules(&CONSOLE_RIGHTS)).await;
    let admin = env.admin_client().await;
    let _virt_api = PlayedVirtApi::start(&admin, OPERATOR_NAMESPACE, "virt-api").await;
    machine_with_vmi(&admin, "team-a", "vm-1").await;
    let alice = user_client(&env, "alice").await;
    let direct_path =
        "/apis/subresources.kubevirt.io/v1/namespaces/team-a/virtualmachineinstances/vm-1/console";
    let mut relayed = open(&alice, &stream_path("team-a", "vm-1", "console"))
        .await
        .expect("relayed");
    let mut straight = open(&admin, direct_path).await.expect("direct");
    let (n, secs) = (500, 5);
    // Warm both paths, then alternate so both see the same machine load.
    measure(&mut straight, 50, 1).await;
    measure(&mut relayed, 50, 1).await;
    let (d_rtt, d_bps) = measure(&mut straight, n, secs).await;
    let (r_rtt, r_bps) = measure(&mut relayed, n, secs).await;
    let pct = |v: &[Duration], p: usize| v[(v.len() * p / 100).min(v.len() - 1)];
    let row = |name: &str, v: &[Duration], bps: f64| {
        println!(
            "{name}: rtt p50 {:?} p99 {:?}, {:.1} MiB/s echoed",
            pct(v, 50),
            pct(v, 99),
            bps / f64::from(1u32 << 20)
        );
    };
    row("direct (kube-apiserver -> virt-api)", &d_rtt, d_bps);
    row(
        "relayed (kube-apiserver -> operator -> kube-apiserver -> virt-api)",
        &r_rtt,
        r_bps,
    );
    println!(
        "ratios relayed/direct: rtt p50 {:.2}, throughput {:.2}",
        pct(&r_rtt, 50).as_secs_f64() / pct(&d_rtt, 50).as_secs_f64(),
        r_bps / d_bps
    );
}
