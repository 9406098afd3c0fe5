//! Issue 33, drains that finish: on a real control plane with `kubevirt-operator run`, playing
//! KubeVirt (a VMI a drain marks with `status.evacuationNodeName`, as KubeVirt's eviction
//! admission and evacuation controller do): an `External` VM gives the Machine
//! `EvictionRequested` with the node named and a Warning Event, and the VMI is left alone under
//! `--external-eviction notify`; under `restart` the marked VMI is deleted (by uid) and the new
//! one KubeVirt starts clears the condition; a `LiveMigrate` VM that cannot migrate says why the
//! drain is blocked.

mod access;
mod kubevirt;
mod support;

use kube::api::Api;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use access::machine_object as machine;
use access::{create_admitted, fixture, machines, wait_status};
use kubevirt_operator::api::MachineStatus;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachineInstance;

const NS: &str = "team-a";

fn eviction(s: &MachineStatus) -> Option<(&str, &str, &str)> {
    let c = s
        .conditions
        .iter()
        .find(|c| c.type_ == "EvictionRequested")?;
    Some((c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

/// Machine `name` with `strategy`, its VM made by the operator, and its VMI running on n1.
async fn running(admin: &Client, op: &support::Proc, name: &str, strategy: &str) -> String {
    let spec = json!({"template": "small", "evictionStrategy": strategy});
    create_admitted(&machines(admin, NS), &machine(name, spec), op).await;
    wait_status(admin, NS, name, op, "the VM made", |s| s.vm_name.is_some()).await;
    kubevirt::vmi(
        admin,
        NS,
        name,
        json!({"phase": "Running", "nodeName": "n1"}),
    )
    .await;
    wait_status(admin, NS, name, op, "running on n1", |s| {
        s.node_name.as_deref() == Some("n1")
    })
    .await;
    vmi_uid(admin, name).await.expect("the VMI")
}

async fn vmi_uid(admin: &Client, name: &str) -> Option<String> {
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(admin.clone(), NS);
    vmis.get_opt(name)
        .await
        .expect("get VMI")
        .and_then(|v| v.uid())
}

/// KubeVirt marks the VMI for a drain of n1.
async fn drain(admin: &Client, name: &str, conditions: Value) {
    let status = json!({"phase": "Running", "nodeName": "n1", "evacuationNodeName": "n1",
        "conditions": conditions});
    kubevirt::vmi(admin, NS, name, status).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_is_said_on_the_machine_and_left_to_the_admin_under_notify() {
    let env = fixture(&[]).start().await;
    let (admin, op) = (env.admin_client().await, env.replica());

    // External: the condition names the node, a Warning says it once, the VMI stays.
    let uid = running(&admin, op, "ext", "External").await;
    drain(&admin, "ext", json!([])).await;
    let s = wait_status(&admin, NS, "ext", op, "EvictionRequested", |s| {
        eviction(s).is_some()
    })
    .await;
    let (status, reason, message) = eviction(&s).expect("condition");
    assert_eq!((status, reason), ("True", "ExternalEviction"));
    assert!(message.contains("node n1 is being drained"), "{message}");
    let warned = support::eventually(access::WAIT, "the Warning Event", || async {
        let events = support::events_about(&admin, NS, "ext").await;
        events
            .into_iter()
            .find(|(type_, reason, _)| type_ == "Warning" && reason == "ExternalEviction")
    })
    .await;
    assert!(warned.2.contains("node n1"), "{warned:?}");
    // A later status change (an IP reported) leaves the VMI alone: notify never restarts.
    kubevirt::vmi(
        &admin,
        NS,
        "ext",
        json!({"phase": "Running", "nodeName": "n1", "evacuationNodeName": "n1",
               "interfaces": [{"name": "default", "ipAddress": "10.0.0.7"}]}),
    )
    .await;
    wait_status(&admin, NS, "ext", op, "the IP reported", |s| {
        s.ip_addresses.iter().any(|a| a == "10.0.0.7")
    })
    .await;
    assert_eq!(
        vmi_uid(&admin, "ext").await,
        Some(uid),
        "notify deletes nothing"
    );

    // LiveMigrate on a VM that cannot migrate: the drain is blocked, and the Machine says why.
    running(&admin, op, "pinned", "LiveMigrate").await;
    let not_migratable = json!([{"type": "LiveMigratable", "status": "False",
        "reason": "DisksNotLiveMigratable", "message": "cannot migrate VMI: PVC pinned-root is not shared"}]);
    drain(&admin, "pinned", not_migratable).await;
    let s = wait_status(&admin, NS, "pinned", op, "the drain blocked", |s| {
        eviction(s).is_some_and(|(_, reason, _)| reason == "NotMigratable")
    })
    .await;
    let (_, _, message) = eviction(&s).expect("condition");
    assert!(
        message.contains("PVC pinned-root is not shared"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_restart_a_drained_external_vm_is_restarted_off_the_node() {
    let env = fixture(&["--external-eviction", "restart"]).start().await;
    let (admin, op) = (env.admin_client().await, env.replica());
    let first = running(&admin, op, "ext", "External").await;
    drain(&admin, "ext", json!([])).await;
    // The operator deletes the marked VMI (KubeVirt's VM controller would start a new one).
    support::eventually_with(
        access::WAIT,
        "the drained VMI deleted",
        || op.log_tail(40),
        || async { (vmi_uid(&admin, "ext").await.as_ref() != Some(&first)).then_some(()) },
    )
    .await;
    let restarted = support::eventually(access::WAIT, "the Restarted Event", || async {
        let events = support::events_about(&admin, NS, "ext").await;
        events
            .into_iter()
            .find(|(_, reason, _)| reason == "Restarted")
    })
    .await;
    assert!(restarted.2.contains("off node n1"), "{restarted:?}");
    // KubeVirt starts a new VMI elsewhere: the condition goes, and nothing more is deleted.
    kubevirt::vmi(
        &admin,
        NS,
        "ext",
        json!({"phase": "Running", "nodeName": "n2"}),
    )
    .await;
    let second = vmi_uid(&admin, "ext").await.expect("the new VMI");
    wait_status(&admin, NS, "ext", op, "running on n2, no eviction", |s| {
        s.node_name.as_deref() == Some("n2") && eviction(s).is_none()
    })
    .await;
    assert_eq!(vmi_uid(&admin, "ext").await, Some(second), "restarted once");
}
