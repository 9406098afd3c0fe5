//! Leader election between `kubevirt-operator run` processes on one control plane: only the
//! Lease holder reconciles; when it is killed, another replica takes over once the Lease expires
//! (15s after its last renewal); when it shuts down cleanly, it releases the Lease and exits.

mod operator;
mod stalling_proxy;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;

use kubevirt_operator::api::Machine;
use kubevirt_operator::leader::LEASE_DURATION;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use operator::{OPERATOR_USER, Operator, eventually, lease_holder};
use stalling_proxy::StallingProxy;
use support::{Fixture, Started};

const WAIT: Duration = Duration::from_secs(40);

/// A control plane of its own with the CRDs and the operator's user; the tests start replicas.
async fn fixture() -> Started {
    Fixture::new().with_all_crds().operator_rbac().start().await
}

async fn create_machine(client: &Client, ns: &str, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": {"template": "small"}
    }))
    .expect("machine");
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ApiResource::erase::<Machine>(&()))
        .create(&PostParams::default(), &obj)
        .await
        .expect("create machine");
}

async fn wait_vm(client: &Client, ns: &str, name: &str) {
    let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), ns);
    eventually(WAIT, &format!("VirtualMachine {name}"), || async {
        vms.get_opt(name).await.ok().flatten()
    })
    .await;
}

fn started_controller(op: &Operator) -> bool {
    std::fs::read_to_string(&op.proc.log)
        .unwrap_or_default()
        .contains("starting the Machine controller")
}

#[tokio::test]
async fn only_the_leader_reconciles_and_a_replica_takes_over() {
    let cp = fixture().await;
    let (client, user) = (cp.admin_client().await, cp.user(OPERATOR_USER));
    let ns = cp.namespace("leader").await.expect("namespace");

    let mut ops = vec![
        Operator::start(&cp, user, "replica-a", &[]),
        Operator::start(&cp, user, "replica-b", &[]),
    ];
    let holder = eventually(WAIT, "a Lease holder", || lease_holder(&client)).await;
    let leader = ops
        .iter()
        .position(|o| o.identity == holder)
        .expect("holder is one of ours");
    let follower = 1 - leader;

    create_machine(&client, &ns, "first").await;
    wait_vm(&client, &ns, "first").await;
    assert!(started_controller(&ops[leader]));
    assert!(
        !started_controller(&ops[follower]),
        "the follower must not reconcile:\n{}",
        ops[follower].log_tail()
    );

    // The leader dies without releasing the Lease.
    ops[leader].proc.kill();
    let killed = Instant::now();
    let new_holder = ops[follower].identity.clone();
    eventually(WAIT, "the follower to take the Lease", || async {
        (lease_holder(&client).await.as_deref() == Some(new_holder.as_str())).then_some(())
    })
    .await;
    let takeover = killed.elapsed();
    eprintln!("takeover after the leader was killed: {takeover:?}");
    // The Lease expires at most its duration after the last renewal; the follower then needs up
    // to a second (its random back-off) and one request.
    assert!(
        takeover <= Duration::from_secs(LEASE_DURATION + 2),
        "took {takeover:?}"
    );
    create_machine(&client, &ns, "second").await;
    wait_vm(&client, &ns, "second").await;

    // A clean shutdown stops reconciling and releases the Lease; a waiting replica takes it when
    // it next looks, at the latest when the old Lease would have expired.
    ops.push(Operator::start(&cp, user, "replica-c", &[]));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        lease_holder(&client).await.as_deref(),
        Some(new_holder.as_str())
    );
    ops[follower].terminate();
    let stopped = Instant::now();
    // Released at once (SIGTERM, then the release): long before the Lease could expire.
    eventually(Duration::from_secs(5), "the Lease released", || async {
        (lease_holder(&client).await.as_deref() != Some(new_holder.as_str())).then_some(())
    })
    .await;
    eventually(WAIT, "replica-c to take the Lease", || async {
        (lease_holder(&client).await.as_deref() == Some("replica-c")).then_some(())
    })
    .await;
    let handover = stopped.elapsed();
    eprintln!("handover after a clean shutdown: {handover:?}");
    assert!(
        handover <= Duration::from_secs(LEASE_DURATION + 2),
        "took {handover:?}"
    );
    let exited = eventually(WAIT, "the old leader to exit", || {
        let status = ops[follower].proc.exited();
        async move { status }
    })
    .await;
    assert!(exited.success(), "clean exit: {exited}");
    create_machine(&client, &ns, "third").await;
    wait_vm(&client, &ns, "third").await;
}

/// The JSON log's timestamp of the first line containing `needle`.
fn logged_at(op: &Operator, needle: &str) -> Option<Timestamp> {
    let log = std::fs::read_to_string(&op.proc.log).ok()?;
    let line = log.lines().find(|l| l.contains(needle))?;
    let line: serde_json::Value = serde_json::from_str(line).ok()?;
    line["timestamp"].as_str()?.parse().ok()
}

/// Once replica-a has lost its API server: replica-b (reached through `client`) takes the Lease
/// and reconciles, and replica-a's log shows it stopped leading before replica-b began.
async fn b_takes_over_after_a_stepped_down(
    client: &Client,
    ns: &str,
    a: &Operator,
    b: &Operator,
    event: &str,
) {
    let cut = Instant::now();
    eventually(WAIT, "replica-b to take the Lease", || async {
        (lease_holder(client).await.as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    let takeover = cut.elapsed();
    create_machine(client, ns, "after").await;
    wait_vm(client, ns, "after").await;

    let stepped_down = logged_at(a, "cannot confirm the Lease").unwrap_or_else(|| {
        panic!(
            "replica-a never stepped down after {takeover:?}:\n{}",
            a.log_tail()
        )
    });
    let took_over = logged_at(b, "became leader").expect("replica-b's leadership in its log");
    assert!(
        stepped_down < took_over,
        "replica-a stopped at {stepped_down}, after replica-b began leading at {took_over}"
    );
    eprintln!(
        "takeover {takeover:?} after {event}; replica-a stepped down {} before replica-b led",
        took_over.duration_since(stepped_down)
    );
}

/// A leader cut off from its API server, while a replica reaches another API server of the same
/// cluster, stops reconciling before the replica can take the Lease over: never two leaders.
/// Once its API server is back, it finds the Lease taken and stays a follower.
#[tokio::test]
async fn a_cut_off_leader_steps_down_before_its_lease_can_be_taken() {
    let mut cp = fixture().await;
    let (client, user) = (cp.admin_client().await, cp.user(OPERATOR_USER).clone());
    let ns = cp.namespace("cutoff").await.expect("namespace");
    let second = cp.second_apiserver().await.expect("second kube-apiserver");
    let other = second.client().await.expect("second client");

    let mut a = Operator::start(&cp, &user, "replica-a", &[]);
    eventually(WAIT, "replica-a to lead", || async {
        (lease_holder(&client).await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    create_machine(&client, &ns, "before").await;
    wait_vm(&client, &ns, "before").await;
    let second_kubeconfig = cp.dir().join("second.kubeconfig");
    std::fs::write(&second_kubeconfig, second.kubeconfig_yaml()).expect("write kubeconfig");
    let b = Operator::launch(&cp, &second_kubeconfig, "replica-b", &[], &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!started_controller(&b), "replica-b must wait");

    cp.stop_apiserver()
        .expect("stop replica-a's kube-apiserver");
    b_takes_over_after_a_stepped_down(&other, &ns, &a, &b, "the cut").await;

    // Back in touch, replica-a sees the Lease is replica-b's and does not lead again.
    cp.start_apiserver().await.expect("restart kube-apiserver");
    tokio::time::sleep(Duration::from_secs(LEASE_DURATION)).await;
    let log = std::fs::read_to_string(&a.proc.log).unwrap_or_default();
    assert_eq!(
        log.matches("became leader").count(),
        1,
        "replica-a led again:\n{}",
        a.log_tail()
    );
    assert_eq!(lease_holder(&client).await.as_deref(), Some("replica-b"));
    assert!(a.proc.exited().is_none(), "replica-a keeps running");
}

/// A leader whose API server accepts its connections and then never answers (a hung server, a
/// black-holed path: no refusal, no reset) stops reconciling before a replica, which reaches the
/// API server, can take the Lease over. Its Lease reads and renewals time out instead of waiting
/// forever.
#[tokio::test]
async fn a_leader_on_a_hung_connection_steps_down_before_its_lease_can_be_taken() {
    let cp = fixture().await;
    let (client, user) = (cp.admin_client().await, cp.user(OPERATOR_USER));
    let ns = cp.namespace("hung").await.expect("namespace");
    let upstream = cp
        .server_url()
        .trim_start_matches("https://")
        .parse()
        .expect("the API server's address");
    let proxy = StallingProxy::start(upstream).await;
    let proxied = cp.dir().join("proxied.kubeconfig");
    let yaml = cp
        .kubeconfig_yaml(user, None)
        .expect("kubeconfig")
        .replace(cp.server_url(), &proxy.url());
    std::fs::write(&proxied, yaml).expect("write kubeconfig");

    let mut a = Operator::launch(&cp, &proxied, "replica-a", &[], &[]);
    eventually(WAIT, "replica-a to lead", || async {
        (lease_holder(&client).await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    create_machine(&client, &ns, "before").await;
    wait_vm(&client, &ns, "before").await;
    let b = Operator::start(&cp, user, "replica-b", &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!started_controller(&b), "replica-b must wait");

    proxy.stall();
    b_takes_over_after_a_stepped_down(&client, &ns, &a, &b, "the stall").await;
    assert!(a.proc.exited().is_none(), "replica-a keeps running");
}
