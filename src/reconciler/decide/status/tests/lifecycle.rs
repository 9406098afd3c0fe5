//! The phase as the VM, its VMI and its claims move, and how times and generations are kept.

use super::*;
use crate::reconciler::decide::status_write::differs;

#[test]
fn vm_created_claims_pending_is_creating() {
    let v = vm(None);
    let p = pvc(Some("Pending"));
    let mut c = Case::new();
    c.vm = Some(&v);
    c.claims = vec![("m-root".into(), Some(&p)), ("m-data".into(), None)];
    let s = c.status(None, t(0));
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    assert_eq!(s.vm_name.as_deref(), Some("m"));
    assert_eq!(
        summary(&s),
        [
            row("Ready", "False", "PVCPending"),
            row("VirtualMachineReady", "True", "VMCreated"),
            row("StorageReady", "False", "PVCPending"),
            row("NetworkReady", "True", "NetworkConfigured"),
        ]
    );
    assert_eq!(
        cond(&s, "StorageReady").message,
        "Waiting for PersistentVolumeClaims to bind: m-root (Pending), m-data (not created)"
    );
}

#[test]
fn bound_claims_and_a_scheduling_vmi_is_creating() {
    let v = vm(Some("Starting"));
    let p = pvc(Some("Bound"));
    let i = vmi(json!({"phase": "Scheduling"}));
    let mut c = Case::new();
    c.vm = Some(&v);
    c.vmi = Some(&i);
    c.claims = vec![("m-root".into(), Some(&p))];
    let s = c.status(None, t(0));
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    assert_eq!(
        summary(&s),
        [
            row("Ready", "False", "Creating"),
            row("VirtualMachineReady", "True", "VMCreated"),
            row("StorageReady", "True", "PVCBound"),
            row("NetworkReady", "True", "NetworkConfigured"),
        ]
    );
    assert_eq!(s.vmi_name.as_deref(), Some("m"));
}

#[test]
fn running_vmi_gives_running_addresses_and_node() {
    let v = vm(Some("Running"));
    let p = pvc(Some("Bound"));
    let i = vmi(json!({
        "phase": "Running", "nodeName": "node-1",
        "interfaces": [
            {"name": "eth0", "ipAddress": "10.0.0.5", "ipAddresses": ["10.0.0.5", "fd00::5"]},
            {"name": "eth1", "ipAddress": "192.168.1.7"},
            {"name": "eth2", "ipAddresses": ["10.0.0.5"]},
            {"name": "eth3"}
        ]
    }));
    let mut c = Case::new();
    c.vm = Some(&v);
    c.vmi = Some(&i);
    c.claims = vec![("m-root".into(), Some(&p))];
    c.networks = 4;
    let s = c.status(None, t(0));
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(
        (
            cond(&s, "Ready").status.as_str(),
            cond(&s, "Ready").reason.as_str()
        ),
        ("True", "Running")
    );
    assert_eq!(s.ip_addresses, ["10.0.0.5", "fd00::5", "192.168.1.7"]);
    assert_eq!(s.node_name.as_deref(), Some("node-1"));
    assert_eq!(cond(&s, "NetworkReady").message, "4 networks attached");
}

#[test]
fn unschedulable_vmi_is_insufficient_resources() {
    let v = vm(None);
    let i = vmi(json!({"phase": "Scheduling", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient memory."}
    ]}));
    let mut c = Case::new();
    c.vm = Some(&v);
    c.vmi = Some(&i);
    let s = c.status(None, t(0));
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    let vmr = cond(&s, "VirtualMachineReady");
    assert_eq!(
        (vmr.status.as_str(), vmr.reason.as_str()),
        ("False", "InsufficientResources")
    );
    assert_eq!(
        vmr.message,
        "0/3 nodes are available: 3 Insufficient memory."
    );
    assert_eq!(cond(&s, "Ready").reason, "InsufficientResources");

    // KubeVirt's VM printable status says the same when no VMI condition is there yet.
    let v = vm(Some("ErrorUnschedulable"));
    let mut c = Case::new();
    c.vm = Some(&v);
    assert_eq!(
        cond(&c.status(None, t(0)), "VirtualMachineReady").reason,
        "InsufficientResources"
    );
}

#[test]
fn failed_vmi_is_failed() {
    let v = vm(None);
    let i = vmi(json!({"phase": "Failed", "reason": "PodFailed"}));
    let mut c = Case::new();
    c.vm = Some(&v);
    c.vmi = Some(&i);
    let s = c.status(None, t(0));
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(cond(&s, "VirtualMachineReady").reason, "VMFailed");
    assert!(
        cond(&s, "VirtualMachineReady")
            .message
            .contains("PodFailed")
    );
}

#[test]
fn stopped_and_stopping() {
    let v = vm(Some("Stopped"));
    let mut c = Case::new();
    c.running = false;
    c.vm = Some(&v);
    let s = c.status(None, t(0));
    assert_eq!(s.phase.as_deref(), Some("Stopped"));
    assert_eq!(cond(&s, "Ready").reason, "Stopped");
    assert_eq!(s.vmi_name, None);
    // Still running while KubeVirt shuts it down; stopped once the guest is down.
    let running = vmi(json!({"phase": "Running"}));
    c.vmi = Some(&running);
    assert_eq!(c.status(None, t(0)).phase.as_deref(), Some("Running"));
    let done = vmi(json!({"phase": "Succeeded"}));
    c.vmi = Some(&done);
    assert_eq!(c.status(None, t(0)).phase.as_deref(), Some("Stopped"));
    // A guest that shut itself down while it should run is being restarted.
    c.running = true;
    assert_eq!(c.status(None, t(0)).phase.as_deref(), Some("Creating"));
}

#[test]
fn api_failures_land_on_their_condition() {
    let v = vm(None);
    let fail = |kind, name: &str| Problem::WriteFailed {
        kind,
        name: name.into(),
        message: "Forbidden (403): nope".into(),
    };
    let mut c = Case::new();
    c.vm = Some(&v);
    c.problems = vec![fail(Kind::VirtualMachine, "m")];
    let s = c.status(None, t(0));
    assert_eq!(cond(&s, "VirtualMachineReady").reason, "KubeVirtApiError");
    assert_eq!(
        cond(&s, "VirtualMachineReady").message,
        "VirtualMachine m: Forbidden (403): nope"
    );
    assert_eq!(cond(&s, "Ready").reason, "KubeVirtApiError");
    c.problems = vec![fail(Kind::Claim, "m-root")];
    assert_eq!(
        cond(&c.status(None, t(0)), "StorageReady").reason,
        "PVCFailed"
    );
    c.problems = vec![fail(Kind::Attachment, "prod")];
    assert_eq!(
        cond(&c.status(None, t(0)), "NetworkReady").reason,
        "NetworkFailed"
    );
    c.problems = vec![fail(Kind::Secret, "m-cloudinit")];
    assert_eq!(
        cond(&c.status(None, t(0)), "VirtualMachineReady").reason,
        "SecretFailed"
    );
}

#[test]
fn generation_is_observed_on_status_and_conditions() {
    let s = Case::new().status(None, t(0));
    assert_eq!(s.observed_generation, Some(3));
    assert!(
        s.conditions
            .iter()
            .all(|c| c.observed_generation == Some(3))
    );
}

#[test]
fn nothing_changed_means_an_identical_status() {
    let v = vm(None);
    let mut c = Case::new();
    c.vm = Some(&v);
    let first = c.status(None, t(0));
    assert_eq!(first.last_updated, Some(Time(t(0))));
    let again = c.status(Some(&first), t(60));
    assert_eq!(again, first, "no new lastUpdated, no new transition times");
    assert!(!differs(Some(&first), &again));
}

#[test]
fn transition_time_moves_only_when_the_status_flips() {
    let mut c = Case::new();
    c.problems = vec![Problem::StorageClassNotFound {
        disk: "data".into(),
        storage_class: "gold".into(),
    }];
    let first = c.status(None, t(0));
    // Same status (False), other reason: the transition time stays.
    let v = vm(None);
    let p = pvc(Some("Pending"));
    c.problems = vec![];
    c.vm = Some(&v);
    c.claims = vec![("m-root".into(), Some(&p))];
    let second = c.status(Some(&first), t(10));
    let storage = cond(&second, "StorageReady");
    assert_eq!(storage.reason, "PVCPending");
    assert_eq!(storage.last_transition_time, Time(t(0)));
    // VirtualMachineReady flipped False -> True: new time.
    assert_eq!(
        cond(&second, "VirtualMachineReady").last_transition_time,
        Time(t(10))
    );
    assert_eq!(second.last_updated, Some(Time(t(10))));
    assert!(differs(Some(&first), &second));
}

#[test]
fn times_are_whole_seconds_as_the_api_stores_them() {
    let now = Timestamp::from_second(1_700_000_000).unwrap()
        + k8s_openapi::jiff::SignedDuration::from_millis(999);
    let s = Case::new().status(None, now);
    assert_eq!(s.last_updated, Some(Time(t(0))));
}

#[test]
fn only_last_updated_differing_is_not_a_change() {
    let a = Case::new().status(None, t(0));
    let mut b = a.clone();
    b.last_updated = Some(Time(t(99)));
    assert!(!differs(Some(&a), &b));
    assert!(differs(None, &b));
    b.node_name = Some("n".into());
    assert!(differs(Some(&a), &b));
}
