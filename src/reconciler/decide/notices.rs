//! What a status change is worth telling the user as an Event (pure): a problem they can fix
//! (once, when it appears), the VM being created, the Machine starting to run or stopping, a
//! drain or a dead node, disks hot-plugged, migrations. `act::events` publishes them.

use kube::runtime::events::EventType;

use crate::api::MachineStatus;
use crate::reconciler::decide::eviction::EVICTION_REQUESTED;
use crate::reconciler::decide::node::NODE_UNREACHABLE;
use crate::reconciler::decide::status::{condition, phase, reason};
use crate::reconciler::decide::{guest, hotplug, migration};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub type_: EventType,
    pub reason: String,
    pub note: String,
}

/// Events for the change from `old` to `new`; none when nothing of note changed, so a Machine
/// stuck on one problem is reported once, not on every retry.
pub fn notices(old: Option<&MachineStatus>, new: &MachineStatus) -> Vec<Notice> {
    let old_conditions = old.map(|s| s.conditions.as_slice()).unwrap_or(&[]);
    let mut out = Vec::new();
    for c in &new.conditions {
        let before = old_conditions.iter().find(|o| o.type_ == c.type_);
        let unchanged = before.is_some_and(|o| o.status == c.status && o.reason == c.reason);
        if c.type_ == condition::READY {
            // It mirrors the others, but for a dead node, which only it says.
            if c.reason == NODE_UNREACHABLE && c.status == "False" && !unchanged {
                out.push(Notice {
                    type_: EventType::Warning,
                    reason: c.reason.clone(),
                    note: c.message.clone(),
                });
            }
            continue;
        }
        if unchanged {
            continue;
        }
        // Waiting, not failing: a claim binding, a VM waiting for them, a guest agent starting.
        let waiting = matches!(
            c.reason.as_str(),
            reason::PVC_PENDING | reason::VM_PENDING | guest::AGENT_NOT_CONNECTED
        );
        // A drain reaching the VM is news while it holds, not a failure of the Machine's.
        let drained = c.type_ == EVICTION_REQUESTED && c.status == "True";
        if (c.status == "False" && !waiting) || drained {
            out.push(Notice {
                type_: EventType::Warning,
                reason: c.reason.clone(),
                note: c.message.clone(),
            });
        } else if c.type_ == condition::VIRTUAL_MACHINE_READY && c.reason == reason::VM_CREATED {
            out.push(Notice {
                type_: EventType::Normal,
                reason: c.reason.clone(),
                note: c.message.clone(),
            });
        }
    }
    let old_phase = old.and_then(|s| s.phase.as_deref());
    if let Some(p @ (phase::RUNNING | phase::STOPPED)) = new.phase.as_deref()
        && old_phase != Some(p)
    {
        out.push(Notice {
            type_: EventType::Normal,
            reason: p.to_owned(),
            note: format!("Machine is {}", p.to_lowercase()),
        });
    }
    out.extend(
        (hotplug::events(old, new).into_iter()).map(|(reason, note)| Notice {
            type_: EventType::Normal,
            reason,
            note,
        }),
    );
    let old_migration = old.and_then(|s| s.migration.as_ref());
    let migration = migration::events(old_migration, new.migration.as_ref());
    out.extend(migration.into_iter().map(|(type_, reason, note)| Notice {
        type_,
        reason: reason.to_owned(),
        note,
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;

    fn status(phase: &str, conds: &[(&str, &str, &str)]) -> MachineStatus {
        MachineStatus {
            phase: Some(phase.into()),
            conditions: conds
                .iter()
                .map(|(t, s, r)| Condition {
                    type_: (*t).into(),
                    status: (*s).into(),
                    reason: (*r).into(),
                    message: format!("{r} message"),
                    last_transition_time: Time(Timestamp::UNIX_EPOCH),
                    observed_generation: None,
                })
                .collect(),
            ..MachineStatus::default()
        }
    }

    fn reasons(n: &[Notice]) -> Vec<(EventType, &str)> {
        n.iter().map(|n| (n.type_, n.reason.as_str())).collect()
    }

    #[test]
    fn a_new_problem_is_a_warning_once() {
        let blocked = status(
            "Pending",
            &[
                ("Ready", "False", "StorageClassNotFound"),
                ("VirtualMachineReady", "False", "VMPending"),
                ("StorageReady", "False", "StorageClassNotFound"),
            ],
        );
        let n = notices(None, &blocked);
        assert_eq!(reasons(&n), [(EventType::Warning, "StorageClassNotFound")]);
        assert_eq!(n[0].note, "StorageClassNotFound message");
        assert!(
            notices(Some(&blocked), &blocked).is_empty(),
            "not again on retry"
        );
    }

    #[test]
    fn creation_and_running_are_normal_events() {
        let creating = status("Creating", &[("VirtualMachineReady", "True", "VMCreated")]);
        assert_eq!(
            reasons(&notices(None, &creating)),
            [(EventType::Normal, "VMCreated")]
        );
        let running = status("Running", &[("VirtualMachineReady", "True", "VMCreated")]);
        assert_eq!(
            reasons(&notices(Some(&creating), &running)),
            [(EventType::Normal, "Running")]
        );
        let stopped = status("Stopped", &[("VirtualMachineReady", "True", "VMCreated")]);
        assert_eq!(
            reasons(&notices(Some(&running), &stopped)),
            [(EventType::Normal, "Stopped")]
        );
    }

    #[test]
    fn a_changed_reason_is_reported() {
        let a = status(
            "Creating",
            &[("VirtualMachineReady", "False", "InsufficientResources")],
        );
        let b = status(
            "Creating",
            &[("VirtualMachineReady", "False", "KubeVirtApiError")],
        );
        assert_eq!(
            reasons(&notices(Some(&a), &b)),
            [(EventType::Warning, "KubeVirtApiError")]
        );
        let pending = status("Creating", &[("StorageReady", "False", "PVCPending")]);
        assert!(
            notices(Some(&a), &pending)
                .iter()
                .all(|n| n.reason != "PVCPending"),
            "waiting is not a problem"
        );
    }
}
