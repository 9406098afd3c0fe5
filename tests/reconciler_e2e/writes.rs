//! Converged Machines cause no writes; the finalizer and the status as the VMI goes.

use crate::operator::{OPERATOR_USER, RESYNC, eventually};
use crate::support::ControlPlane;
#[allow(unused_imports)]
use crate::*;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kubevirt_operator::machine::FINALIZER;
use serde_json::json;

#[tokio::test]
async fn converged_machines_cause_no_writes() {
    let env = env("converged").await;
    env.network_configuration("lan", "br0", 7).await;
    env.create_machine("plain", json!({"template": "small"}))
        .await;
    env.create_machine(
        "wired",
        json!({"networks": [{"name": "eth0", "networkName": "lan"}], "cloudInit": {"userData": "#cloud-config\n"}}),
    )
    .await;
    for m in ["plain", "wired"] {
        env.wait_status(m, "Creating", |s| s.phase.as_deref() == Some("Creating"))
            .await;
    }
    // Let the writes the first reconciles caused come back as events and settle.
    tokio::time::sleep(RESYNC * 2).await;
    let before = versions(&env).await;
    assert_eq!(before.len(), 2 + 2 + 2 + 1, "{before:?}");
    tokio::time::sleep(RESYNC * 4).await;
    assert_eq!(
        versions(&env).await,
        before,
        "resyncs of converged Machines wrote something"
    );
}

/// The operator's writes to Machines in this namespace, as (name, subresource, verb).
fn machine_writes(cp: &ControlPlane, ns: &str) -> Vec<(String, String, String)> {
    cp.audited_requests()
        .expect("audit log")
        .into_iter()
        .filter(|r| {
            r.user == OPERATOR_USER
                && r.resource == "machines"
                && r.namespace == ns
                && matches!(r.verb.as_str(), "patch" | "update")
        })
        .map(|r| (r.name, r.subresource, r.verb))
        .collect()
}

#[tokio::test]
async fn the_finalizer_is_written_only_when_missing() {
    let env = env("finalizer-writes").await;
    let cp = shared().await;
    // As the mutating webhook stores a new Machine, and as one stored before it was installed.
    env.create_machine_with(
        json!({"metadata": {"name": "admitted", "finalizers": [FINALIZER]},
                                   "spec": {"template": "small"}}),
    )
    .await;
    env.create_machine("legacy", json!({"template": "small"}))
        .await;
    for m in ["admitted", "legacy"] {
        env.wait_status(m, "a status naming its VM", |s| s.vm_name.is_some())
            .await;
        let machine = env.machines().get(m).await.expect("get");
        assert_eq!(machine.finalizers(), [FINALIZER], "{m}");
    }
    // The audit log is written as requests complete; the status writes come last.
    let writes = eventually(WAIT, "both status writes in the audit log", || async {
        let w = machine_writes(cp, &env.ns);
        ["admitted", "legacy"]
            .iter()
            .all(|m| w.iter().any(|(n, sub, _)| n == m && sub == "status"))
            .then_some(w)
    })
    .await;
    let main_resource = |m: &str| {
        writes
            .iter()
            .filter(|(n, sub, _)| n == m && sub.is_empty())
            .count()
    };
    assert_eq!(main_resource("admitted"), 0, "{writes:?}");
    assert_eq!(main_resource("legacy"), 1, "{writes:?}");
}

#[tokio::test]
async fn status_follows_the_vmi() {
    let env = env("status-walk").await;
    env.create_machine("walk", json!({"template": "small"}))
        .await;
    env.wait_vm("walk").await;
    let s = env
        .wait_status("walk", "Creating", |s| {
            s.phase.as_deref() == Some("Creating")
        })
        .await;
    assert_eq!(condition(&s, "StorageReady"), cond("False", "PVCPending"));
    assert_eq!(
        condition(&s, "VirtualMachineReady"),
        cond("True", "VMCreated")
    );
    assert_eq!(s.vm_name.as_deref(), Some("walk"));
    assert_eq!(s.observed_generation, Some(1));
    env.wait_event("walk", "VMCreated").await;

    env.bind_pvc("walk-root").await;
    let s = env
        .wait_status("walk", "storage bound", |s| {
            condition(s, "StorageReady").0 == "True"
        })
        .await;
    assert_eq!(condition(&s, "StorageReady"), cond("True", "PVCBound"));
    let bound_at = s
        .conditions
        .iter()
        .find(|c| c.type_ == "StorageReady")
        .map(|c| c.last_transition_time.clone());

    env.vmi("walk", json!({"phase": "Scheduling"})).await;
    let s = env
        .wait_status("walk", "the VMI", |s| s.vmi_name.is_some())
        .await;
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    assert_eq!(condition(&s, "Ready"), cond("False", "Creating"));

    env.vmi(
        "walk",
        json!({"phase": "Scheduling", "conditions": [{"type": "PodScheduled", "status": "False",
               "reason": "Unschedulable", "message": "0/3 nodes are available: 3 Insufficient memory."}]}),
    )
    .await;
    let s = env
        .wait_status("walk", "InsufficientResources", |s| {
            condition(s, "VirtualMachineReady").1 == "InsufficientResources"
        })
        .await;
    assert_eq!(
        condition(&s, "Ready"),
        cond("False", "InsufficientResources")
    );
    let note = env.wait_event("walk", "InsufficientResources").await;
    assert!(note.contains("Insufficient memory"), "{note}");

    env.vmi(
        "walk",
        json!({"phase": "Running", "nodeName": "node-a", "interfaces": [
            {"name": "default", "ipAddress": "10.244.0.7", "ipAddresses": ["10.244.0.7", "fd10::7"]}]}),
    )
    .await;
    let s = env
        .wait_status("walk", "Running", |s| s.phase.as_deref() == Some("Running"))
        .await;
    assert_eq!(condition(&s, "Ready"), cond("True", "Running"));
    assert_eq!(s.node_name.as_deref(), Some("node-a"));
    assert_eq!(s.ip_addresses, ["10.244.0.7", "fd10::7"]);
    assert_eq!(s.vmi_name.as_deref(), Some("walk"));
    let storage_since = s
        .conditions
        .iter()
        .find(|c| c.type_ == "StorageReady")
        .map(|c| c.last_transition_time.clone());
    assert_eq!(
        storage_since, bound_at,
        "unchanged conditions keep their transition time"
    );
    env.wait_event("walk", "Running").await;

    // Stop: the VM halts, KubeVirt removes the VMI.
    env.machines()
        .patch(
            "walk",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"running": false}})),
        )
        .await
        .expect("stop");
    eventually(WAIT, "runStrategy Halted", || async {
        let vm = env.vm("walk").await?;
        (vm.spec.run_strategy.as_deref() == Some("Halted")).then_some(())
    })
    .await;
    env.delete_vmi("walk").await;
    let s = env
        .wait_status("walk", "Stopped", |s| s.phase.as_deref() == Some("Stopped"))
        .await;
    assert_eq!((&s.vmi_name, &s.node_name), (&None, &None));
    assert!(s.ip_addresses.is_empty());
    assert_eq!(condition(&s, "Ready"), cond("False", "Stopped"));
    assert_eq!(s.observed_generation, Some(2));

    // Start again; KubeVirt reports a terminal failure of the new VMI.
    env.machines()
        .patch(
            "walk",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"running": true}})),
        )
        .await
        .expect("start");
    env.vmi("walk", json!({"phase": "Failed", "reason": "PodFailed"}))
        .await;
    let s = env
        .wait_status("walk", "Failed", |s| s.phase.as_deref() == Some("Failed"))
        .await;
    assert_eq!(
        condition(&s, "VirtualMachineReady"),
        cond("False", "VMFailed")
    );
}
