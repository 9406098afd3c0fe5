//! Phases, conditions and the fields read from the VMI, for every situation the reconciler meets.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimStatus};
use serde_json::json;

use super::*;
use crate::reconciler::apis::kubevirt::VirtualMachineSpec;
use crate::reconciler::decide::eviction::{EVICTION_REQUESTED, Eviction};
use crate::reconciler::decide::problem::Kind;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn vm(printable: Option<&str>) -> VirtualMachine {
    let mut vm = VirtualMachine::new("m", VirtualMachineSpec::default());
    vm.status = printable.map(
        |p| crate::reconciler::apis::kubevirt::VirtualMachineStatus {
            printable_status: Some(p.into()),
            conditions: vec![],
        },
    );
    vm
}

fn vmi(status: serde_json::Value) -> VirtualMachineInstance {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "m", "namespace": "ns"}, "spec": {}, "status": status
    }))
    .unwrap()
}

fn pvc(phase: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        status: phase.map(|p| PersistentVolumeClaimStatus {
            phase: Some(p.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

struct Case<'a> {
    running: bool,
    problems: Vec<Problem>,
    vm: Option<&'a VirtualMachine>,
    vmi: Option<&'a VirtualMachineInstance>,
    claims: Vec<(String, Option<&'a PersistentVolumeClaim>)>,
    networks: usize,
    provisioning: Option<Verdict>,
    disks: Vec<DiskStatus>,
    retain: bool,
    restoring: Option<(&'a str, &'a str)>,
    eviction: Option<Eviction>,
    node: Option<crate::reconciler::decide::node::Unreachable>,
}

impl<'a> Case<'a> {
    fn new() -> Self {
        Case {
            running: true,
            problems: vec![],
            vm: None,
            vmi: None,
            claims: vec![],
            networks: 0,
            provisioning: None,
            disks: vec![],
            retain: false,
            restoring: None,
            eviction: None,
            node: None,
        }
    }

    fn status(&self, previous: Option<&MachineStatus>, now: Timestamp) -> MachineStatus {
        let obs = Reconciled {
            running: self.running,
            problems: &self.problems,
            vm: self.vm,
            vmi: self.vmi,
            claims: self.claims.clone(),
            networks: self.networks,
            spec_networks: &[],
            provisioning: self.provisioning.as_ref(),
            disks: self.disks.clone(),
            retain: self.retain,
            last_restart: None,
            last_restart_generation: None,
            restoring: self.restoring,
            snapshots: None,
            cluster: None,
            cluster_identity: None,
            eviction: self.eviction.as_ref(),
            node: self.node.as_ref(),
            restart_pending: None,
            hotplug: None,
        };
        compute(previous, Some(3), &obs, now)
    }
}

fn cond<'s>(s: &'s MachineStatus, type_: &str) -> &'s Condition {
    s.conditions.iter().find(|c| c.type_ == type_).expect(type_)
}

fn summary(s: &MachineStatus) -> Vec<(String, String, String)> {
    s.conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn row(type_: &str, status: &str, reason: &str) -> (String, String, String) {
    (type_.into(), status.into(), reason.into())
}

#[test]
fn invalid_spec_is_failed_with_the_reason() {
    let mut c = Case::new();
    c.problems = vec![Problem::InvalidSpec {
        template_not_found: true,
        message: "spec.template: Unsupported value: \"huge\"".into(),
    }];
    let s = c.status(None, t(0));
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(
        summary(&s),
        [
            row("Ready", "False", "TemplateNotFound"),
            row("VirtualMachineReady", "False", "TemplateNotFound"),
            row("StorageReady", "Unknown", "TemplateNotFound"),
            row("NetworkReady", "Unknown", "TemplateNotFound"),
        ]
    );
    assert!(cond(&s, "Ready").message.contains("huge"));
    assert_eq!(s.vm_name, None);
}

#[test]
fn a_missing_storage_class_is_creating_and_ready_names_the_cause() {
    let mut c = Case::new();
    c.problems = vec![Problem::StorageClassNotFound {
        disk: "data".into(),
        storage_class: "gold".into(),
    }];
    let s = c.status(None, t(0));
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    assert_eq!(
        summary(&s),
        [
            row("Ready", "False", "StorageClassNotFound"),
            row("VirtualMachineReady", "False", "VMPending"),
            row("StorageReady", "False", "StorageClassNotFound"),
            row("NetworkReady", "True", "NetworkConfigured"),
        ]
    );
    assert_eq!(
        cond(&s, "StorageReady").message,
        "disk \"data\": StorageClass \"gold\" not found"
    );
}

#[test]
fn missing_network_configuration_and_invalid_network() {
    let mut c = Case::new();
    c.networks = 2;
    c.problems = vec![Problem::NetworkConfigurationNotFound {
        network: "eth0".into(),
        network_name: "prod".into(),
    }];
    let s = c.status(None, t(0));
    assert_eq!(
        (
            cond(&s, "NetworkReady").status.as_str(),
            cond(&s, "NetworkReady").reason.as_str()
        ),
        ("False", "NetworkConfigurationNotFound")
    );
    assert_eq!(cond(&s, "Ready").reason, "NetworkConfigurationNotFound");
    c.problems = vec![Problem::NetworkInvalid {
        network_name: "prod".into(),
        message: "NetworkConfiguration \"prod\" has no bridge".into(),
    }];
    let s = c.status(None, t(0));
    assert_eq!(cond(&s, "NetworkReady").reason, "NetworkInvalid");
    assert!(cond(&s, "NetworkReady").message.contains("no bridge"));
}

#[test]
fn missing_secret_and_key() {
    let mut c = Case::new();
    c.problems = vec![Problem::SecretNotFound {
        name: "boot".into(),
    }];
    let s = c.status(None, t(0));
    assert_eq!(cond(&s, "VirtualMachineReady").reason, "SecretNotFound");
    assert_eq!(cond(&s, "Ready").reason, "SecretNotFound");
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    c.problems = vec![Problem::SecretKeyNotFound {
        name: "boot".into(),
        key: "cfg".into(),
    }];
    let s = c.status(None, t(0));
    assert_eq!(cond(&s, "VirtualMachineReady").reason, "SecretKeyNotFound");
    assert_eq!(
        cond(&s, "VirtualMachineReady").message,
        "cloud-init Secret \"boot\" has no key \"cfg\""
    );
}

mod lifecycle;
mod node;
mod provisioning;

#[test]
fn disks_retained_shows_only_under_retain_disks_and_names_a_failed_release() {
    let now = Timestamp::UNIX_EPOCH;
    let plain = Case::new().status(None, now);
    assert!(
        !plain.conditions.iter().any(|c| c.type_ == "DisksRetained"),
        "{plain:?}"
    );
    let mut c = Case::new();
    c.retain = true;
    let held = c.status(None, now);
    let d = cond(&held, "DisksRetained");
    assert_eq!(
        (d.status.as_str(), d.reason.as_str()),
        ("True", "DisksReleased")
    );
    c.problems = vec![Problem::ReleaseFailed {
        kind: crate::reconciler::decide::problem::Kind::Claim,
        name: "m-data".into(),
        message: "conflict".into(),
    }];
    let failed = c.status(None, now);
    let d = cond(&failed, "DisksRetained");
    assert_eq!(
        (d.status.as_str(), d.reason.as_str()),
        ("False", "ReleaseFailed")
    );
    assert!(d.message.contains("m-data"), "{}", d.message);
    // A failed release is no reason to call the Machine not ready.
    assert_eq!(cond(&failed, "Ready").status, cond(&held, "Ready").status);
}

#[test]
fn eviction_requested_shows_while_a_drain_holds_the_vm_and_says_its_reason() {
    let now = Timestamp::UNIX_EPOCH;
    let plain = Case::new().status(None, now);
    assert!(
        !plain
            .conditions
            .iter()
            .any(|c| c.type_ == EVICTION_REQUESTED),
        "{plain:?}"
    );
    let mut c = Case::new();
    c.eviction = Some(Eviction {
        node: "n1".into(),
        reason: "ExternalEviction",
        message: "node n1 is being drained".into(),
        restart: false,
    });
    let drained = c.status(None, now);
    let e = cond(&drained, EVICTION_REQUESTED);
    assert_eq!(
        (e.status.as_str(), e.reason.as_str(), e.message.as_str()),
        ("True", "ExternalEviction", "node n1 is being drained")
    );
    // Announced once, as a Warning with the same reason word.
    let notices = crate::reconciler::decide::notices::notices(Some(&plain), &drained);
    assert!(
        notices
            .iter()
            .any(|n| n.reason == "ExternalEviction" && n.note == "node n1 is being drained"),
        "{notices:?}"
    );
    assert!(crate::reconciler::decide::notices::notices(Some(&drained), &drained).is_empty());
}

#[test]
fn restoring_shows_only_while_a_restore_holds_the_machine() {
    let now = Timestamp::UNIX_EPOCH;
    let plain = Case::new().status(None, now);
    assert!(
        !plain.conditions.iter().any(|c| c.type_ == "Restoring"),
        "{plain:?}"
    );
    let mut c = Case::new();
    c.restoring = Some(("undo", "Restoring"));
    let held = c.status(None, now);
    let r = cond(&held, "Restoring");
    assert_eq!(
        (r.status.as_str(), r.reason.as_str()),
        ("True", "RestoreInProgress")
    );
    assert!(
        r.message.contains("MachineRestore undo (Restoring)"),
        "{}",
        r.message
    );
}
