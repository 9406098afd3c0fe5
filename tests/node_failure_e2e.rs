//! Issue 33, node failure said plainly: on a real control plane with `kubevirt-operator run` as
//! a user holding exactly `manifests/rbac/` (so the Node watch's rights are proven too), playing
//! KubeVirt (a VMI on node `n1`) and the node lifecycle controller (the Node's `Ready`
//! condition, written through the API server). A Machine whose VM runs on a node NotReady or
//! unreachable past `--node-unreachable-grace` shows `Ready=False`, reason `NodeUnreachable`,
//! naming the node, since when and the out-of-service recovery, with a Warning Event; nothing is
//! deleted; before the grace nothing changes; when the node is Ready again the condition goes.
//!
//! The resync is 10 minutes: every change here must come from the Node watch's trigger and the
//! requeue at the end of the grace, never from a periodic pass over every Machine.

mod kubevirt;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use kubevirt_operator::api::{Machine, MachineStatus};
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use support::{Fixture, Started};

const WAIT: Duration = Duration::from_secs(60);
const GRACE_SECS: i64 = 5;

async fn start() -> Started {
    Fixture::new()
        .with_all_crds()
        .operator(
            "node",
            &[
                "--node-unreachable-grace",
                "5s",
                "--reconcile-interval",
                "10m",
            ],
        )
        .start()
        .await
}

/// Whole seconds, as the API server keeps times.
fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).expect("now")
}

/// Plays the kubelet and the node lifecycle controller: Node `name`'s Ready condition.
async fn node_ready(admin: &Client, name: &str, status: &str, since: Timestamp) {
    let nodes: Api<Node> = Api::all(admin.clone());
    if nodes.get_opt(name).await.expect("get Node").is_none() {
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}
        }))
        .expect("Node");
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create Node");
    }
    let reason = if status == "True" {
        "KubeletReady"
    } else {
        "NodeStatusUnknown"
    };
    let status = json!({"status": {"conditions": [{
        "type": "Ready", "status": status, "reason": reason,
        "message": "written by the test", "lastHeartbeatTime": since.to_string(),
        "lastTransitionTime": since.to_string()}]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("Node status");
}

/// Machine `name` in `ns`, its VM made by the operator and its VMI running on n1.
async fn running_on_n1(env: &Started, admin: &Client, ns: &str, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": {"template": "small"}
    }))
    .expect("machine");
    Api::<DynamicObject>::namespaced_with(admin.clone(), ns, &ApiResource::erase::<Machine>(&()))
        .create(&PostParams::default(), &obj)
        .await
        .expect("create Machine");
    wait_status(env, admin, ns, name, "the VM made", |s| s.vm_name.is_some()).await;
    kubevirt::vmi(
        admin,
        ns,
        name,
        json!({"phase": "Running", "nodeName": "n1"}),
    )
    .await;
}

async fn wait_status(
    env: &Started,
    admin: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&MachineStatus) -> bool,
) -> MachineStatus {
    let api: Api<Machine> = Api::namespaced(admin.clone(), ns);
    support::eventually_with(
        WAIT,
        what,
        || env.operator().log_tail(),
        || async {
            let status = api.get_opt(name).await.ok().flatten()?.status?;
            pred(&status).then_some(status)
        },
    )
    .await
}

fn ready(s: &MachineStatus) -> (&str, &str, &str, Timestamp) {
    let c = (s.conditions.iter())
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    let t = c.last_transition_time.0;
    (c.status.as_str(), c.reason.as_str(), c.message.as_str(), t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_on_a_node_unreachable_past_the_grace_is_said_and_nothing_is_deleted() {
    let env = start().await;
    let admin = env.admin_client().await;
    let ns = env.namespace("dead").await.expect("namespace");
    node_ready(&admin, "n1", "True", now()).await;
    running_on_n1(&env, &admin, &ns, "vm1").await;
    let before = wait_status(&env, &admin, &ns, "vm1", "running on n1", |s| {
        s.node_name.as_deref() == Some("n1")
    })
    .await;
    assert_ne!(ready(&before).1, "NodeUnreachable");
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(admin.clone(), &ns);
    let uid = vmis.get("vm1").await.expect("VMI").uid();

    // The node stops reporting: nothing before the grace, NodeUnreachable after it.
    let since = now();
    node_ready(&admin, "n1", "Unknown", since).await;
    // Watched closely: never said before the grace from `since` has passed (one clock here).
    let api: Api<Machine> = Api::namespaced(admin.clone(), &ns);
    let deadline = std::time::Instant::now() + WAIT;
    let s = loop {
        let s = api
            .get("vm1")
            .await
            .expect("Machine")
            .status
            .expect("status");
        if ready(&s).1 == "NodeUnreachable" {
            let seen = Timestamp::now().as_second();
            assert!(
                seen >= since.as_second() + GRACE_SECS,
                "said at {seen}, before the grace from {since} ended"
            );
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no NodeUnreachable: {s:?}\n{}",
            env.operator().log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (status, _, message, _) = ready(&s);
    assert_eq!(status, "False");
    for part in [
        "node n1".to_owned(),
        format!("since {since}"),
        "node.kubernetes.io/out-of-service".to_owned(),
        "deletes nothing".to_owned(),
    ] {
        assert!(message.contains(&part), "{part}: {message}");
    }
    // The other conditions are kept; the phase still follows the VMI.
    assert!(
        (s.conditions.iter()).any(|c| c.type_ == "VirtualMachineReady" && c.status == "True"),
        "{s:?}"
    );
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let warned = support::eventually(WAIT, "the Warning Event", || async {
        let events = support::events_about(&admin, &ns, "vm1").await;
        events
            .into_iter()
            .find(|(type_, reason, _)| type_ == "Warning" && reason == "NodeUnreachable")
    })
    .await;
    assert!(warned.2.contains("node n1"), "{warned:?}");
    // Nothing is deleted by the operator on its own.
    assert_eq!(vmis.get("vm1").await.expect("the VMI stays").uid(), uid);
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), &ns);
    assert!(vms.get_opt("vm1").await.expect("get VM").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_condition_clears_when_the_node_is_ready_again() {
    let env = start().await;
    let admin = env.admin_client().await;
    let ns = env.namespace("back").await.expect("namespace");
    // Down for an hour already: said as soon as the VMI is seen there.
    let long_ago = Timestamp::from_second(now().as_second() - 3600).expect("time");
    node_ready(&admin, "n1", "False", long_ago).await;
    running_on_n1(&env, &admin, &ns, "vm2").await;
    let s = wait_status(&env, &admin, &ns, "vm2", "NodeUnreachable", |s| {
        ready(s).1 == "NodeUnreachable"
    })
    .await;
    assert!(ready(&s).2.contains("NotReady (Ready=False)"), "{s:?}");

    node_ready(&admin, "n1", "True", now()).await;
    let s = wait_status(&env, &admin, &ns, "vm2", "NodeUnreachable cleared", |s| {
        ready(s).1 != "NodeUnreachable"
    })
    .await;
    assert!(
        !(s.conditions.iter()).any(|c| c.message.contains("out-of-service")),
        "{s:?}"
    );
}

/// Nodes are optional: an operator that may not list them warns once, becomes ready and
/// reconciles Machines as before, and never says NodeUnreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_right_to_list_nodes_the_operator_warns_and_is_ready() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let env = Fixture::new().with_all_crds().start().await;
    let admin = env.admin_client().await;
    let ns = env.namespace("blind").await.expect("namespace");
    let user = support::operator::operator_user(&env.cp, &admin, "no-nodes").await;
    // manifests/rbac/ without its Node rule.
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let mut role = roles.get("kubevirt-operator").await.expect("ClusterRole");
    let rules = role.rules.get_or_insert_with(Vec::new);
    let before = rules.len();
    rules.retain(|r| !r.resources.iter().flatten().any(|x| x == "nodes"));
    assert_eq!(
        rules.len(),
        before - 1,
        "manifests/rbac/ grants nodes in one rule"
    );
    roles
        .replace("kubevirt-operator", &PostParams::default(), &role)
        .await
        .expect("ClusterRole without nodes");
    let long_ago = Timestamp::from_second(now().as_second() - 3600).expect("time");
    node_ready(&admin, "n1", "Unknown", long_ago).await;
    let op = support::operator::Operator::start(
        &env.cp,
        &user,
        "no-nodes",
        &["--node-unreachable-grace", "0s"],
    );
    support::eventually_with(
        WAIT,
        "ready",
        || op.log_tail(),
        || async { (op.readyz().await == Some(200)).then_some(()) },
    )
    .await;
    support::eventually_with(
        WAIT,
        "the warning",
        || op.log_tail(),
        || async { op.log_tail().contains("cannot list Nodes").then_some(()) },
    )
    .await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "vm3"}, "spec": {"template": "small"}
    }))
    .expect("machine");
    Api::<DynamicObject>::namespaced_with(admin.clone(), &ns, &ApiResource::erase::<Machine>(&()))
        .create(&PostParams::default(), &obj)
        .await
        .expect("create Machine");
    let api: Api<Machine> = Api::namespaced(admin.clone(), &ns);
    let status = |what: &'static str, pred: fn(&MachineStatus) -> bool| {
        let (api, op) = (api.clone(), &op);
        support::eventually_with(
            WAIT,
            what,
            move || op.log_tail(),
            move || {
                let api = api.clone();
                async move {
                    let s = api.get_opt("vm3").await.ok().flatten()?.status?;
                    pred(&s).then_some(s)
                }
            },
        )
    };
    status("the VM made", |s| s.vm_name.is_some()).await;
    kubevirt::vmi(
        &admin,
        &ns,
        "vm3",
        json!({"phase": "Running", "nodeName": "n1"}),
    )
    .await;
    let s = status("running on n1", |s| s.node_name.as_deref() == Some("n1")).await;
    assert_ne!(ready(&s).1, "NodeUnreachable", "{s:?}");
}
