//! `status.snapshots` (the newest MachineSnapshots of the Machine) and `SnapshotsReady` (pure):
//! the last scheduled snapshot is the newest one the operator's schedule proves it made for
//! this Machine (uid), never one labelled so.

use std::collections::BTreeSet;

use kube::ResourceExt;

use super::{Cond, condition, reason};
use crate::api::snapshots::{MachineSnapshot, NEWEST_SNAPSHOT_REFS, SnapshotRef, snapshot_phase};

/// What the reconciler saw of a Machine's snapshots.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// The Machine has `spec.snapshots`.
    pub scheduled: bool,
    /// KubeVirt's VirtualMachineSnapshot API is served.
    pub api: bool,
    /// The MachineSnapshots of this Machine (not of an earlier one of the same name).
    pub snapshots: Vec<MachineSnapshot>,
    /// Those of earlier Machines of this name (another uid).
    pub earlier: Vec<MachineSnapshot>,
    /// The names of those the operator's schedule made for this Machine: their made-for proof
    /// verifies for its uid. The `scheduled` label is a description anyone may write.
    pub scheduled_by_operator: BTreeSet<String>,
}

fn time(s: &MachineSnapshot) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
    (s.status.as_ref().and_then(|st| st.creation_time.clone()))
        .or_else(|| s.metadata.creation_timestamp.clone())
}

fn newest_first(list: &[MachineSnapshot]) -> Vec<&MachineSnapshot> {
    let mut all: Vec<&MachineSnapshot> = list.iter().collect();
    all.sort_by_key(|s| std::cmp::Reverse((time(s), s.name_any())));
    all
}

/// The newest snapshots of the Machine, newest first, then those of earlier Machines of its
/// name, at most [`NEWEST_SNAPSHOT_REFS`] of each.
pub fn refs(seen: &Seen) -> Vec<SnapshotRef> {
    let listed = |list: &[MachineSnapshot], earlier_machine: bool| {
        newest_first(list)
            .into_iter()
            .take(NEWEST_SNAPSHOT_REFS)
            .map(|s| SnapshotRef {
                name: s.name_any(),
                time: time(s),
                ready: s.status.as_ref().and_then(|st| st.ready_to_use) == Some(true),
                earlier_machine,
            })
            .collect::<Vec<_>>()
    };
    let mut refs = listed(&seen.snapshots, false);
    refs.extend(listed(&seen.earlier, true));
    refs
}

/// `SnapshotsReady`, for a Machine with a schedule only.
pub(super) fn condition(seen: &Seen) -> Option<Cond> {
    if !seen.scheduled {
        return None;
    }
    let t = condition::SNAPSHOTS_READY;
    if !seen.api {
        let message = "KubeVirt's snapshot API (snapshot.kubevirt.io/v1beta1 \
                       VirtualMachineSnapshot) is not installed: no snapshot can be taken";
        return Some(Cond::new(
            t,
            "False",
            reason::SNAPSHOT_API_NOT_INSTALLED,
            message.to_owned(),
        ));
    }
    // On evidence: a snapshot labelled scheduled by anyone else says nothing of the schedule.
    let scheduled = |s: &&MachineSnapshot| seen.scheduled_by_operator.contains(&s.name_any());
    let last = newest_first(&seen.snapshots).into_iter().find(scheduled);
    let Some(last) = last else {
        let message = "no scheduled snapshot yet".to_owned();
        return Some(Cond::new(t, "True", reason::SNAPSHOTS_SCHEDULED, message));
    };
    let status = last.status.clone().unwrap_or_default();
    if status.phase.as_deref() == Some(snapshot_phase::FAILED) {
        let why = status.error.unwrap_or_default();
        let message = format!(
            "the last scheduled snapshot {} failed: {why}",
            last.name_any()
        );
        return Some(Cond::new(t, "False", reason::SNAPSHOT_FAILED, message));
    }
    let message = format!(
        "the last scheduled snapshot {} is {}",
        last.name_any(),
        status.phase.as_deref().unwrap_or(snapshot_phase::PENDING)
    );
    Some(Cond::new(t, "True", reason::SNAPSHOTS_SCHEDULED, message))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::snapshots::SCHEDULED_LABEL;

    fn snap(name: &str, scheduled: bool, status: serde_json::Value) -> MachineSnapshot {
        let labels = if scheduled {
            json!({SCHEDULED_LABEL: "true"})
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "spec": {"machineName": "web"}, "status": status
        }))
        .expect("snapshot")
    }

    fn summary(seen: &Seen) -> Option<(String, String)> {
        condition(seen).map(|c| (c.status.to_owned(), c.reason))
    }

    #[test]
    fn the_newest_few_are_listed_newest_first() {
        let seen = Seen {
            snapshots: (1..=7)
                .map(|d| {
                    snap(
                        &format!("web-2026010{d}0200"),
                        true,
                        json!({"readyToUse": d % 2 == 0, "creationTime": format!("2026-01-0{d}T02:00:03Z")}),
                    )
                })
                .collect(),
            ..Seen::default()
        };
        let r = refs(&seen);
        assert!(r.iter().all(|r| !r.earlier_machine));
        let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "web-202601070200",
                "web-202601060200",
                "web-202601050200",
                "web-202601040200",
                "web-202601030200"
            ]
        );
        assert_eq!(
            r.iter().map(|r| r.ready).collect::<Vec<_>>(),
            [false, true, false, true, false]
        );
    }

    #[test]
    fn an_earlier_machines_snapshots_are_listed_apart() {
        let at =
            |d: u32| json!({"readyToUse": true, "creationTime": format!("2026-01-0{d}T02:00:03Z")});
        let seen = Seen {
            snapshots: vec![snap("web-202601050200", true, at(5))],
            // Newer than the Machine's own: still listed after them, flagged.
            earlier: (6..=9)
                .map(|d| snap(&format!("web-2026010{d}0200"), true, at(d)))
                .chain((1..=3).map(|d| snap(&format!("web-2026010{d}0200"), true, at(d))))
                .collect(),
            ..Seen::default()
        };
        let r = refs(&seen);
        let listed: Vec<(&str, bool)> = r
            .iter()
            .map(|r| (r.name.as_str(), r.earlier_machine))
            .collect();
        assert_eq!(
            listed,
            [
                ("web-202601050200", false),
                ("web-202601090200", true),
                ("web-202601080200", true),
                ("web-202601070200", true),
                ("web-202601060200", true),
                ("web-202601030200", true),
            ]
        );
    }

    #[test]
    fn snapshots_ready_says_whether_the_schedule_works() {
        let ok = snap(
            "web-202601020200",
            true,
            json!({"phase": "Succeeded", "creationTime": "2026-01-02T02:00:03Z"}),
        );
        let failed = snap(
            "web-202601030200",
            true,
            json!({"phase": "Failed", "error": "no VolumeSnapshotClass", "creationTime": "2026-01-03T02:00:03Z"}),
        );
        let by_hand_failed = snap(
            "oops",
            false,
            json!({"phase": "Failed", "creationTime": "2026-01-04T02:00:03Z"}),
        );
        // The operator's schedule made these two (their made-for proof verifies).
        let proven: BTreeSet<String> = ["web-202601020200", "web-202601030200"]
            .map(str::to_owned)
            .into();
        let seen = |scheduled, api, snapshots: Vec<MachineSnapshot>| Seen {
            scheduled,
            api,
            snapshots,
            earlier: vec![],
            scheduled_by_operator: proven.clone(),
        };
        let pair = |s: &str, r: &str| Some((s.to_owned(), r.to_owned()));
        assert_eq!(
            summary(&seen(false, true, vec![failed.clone()])),
            None,
            "no schedule, no condition"
        );
        assert_eq!(
            summary(&seen(true, false, vec![])),
            pair("False", "SnapshotAPINotInstalled")
        );
        assert_eq!(
            summary(&seen(true, true, vec![])),
            pair("True", "SnapshotsScheduled")
        );
        assert_eq!(
            summary(&seen(true, true, vec![ok.clone()])),
            pair("True", "SnapshotsScheduled")
        );
        assert_eq!(
            summary(&seen(true, true, vec![ok.clone(), failed.clone()])),
            pair("False", "SnapshotFailed")
        );
        // Only scheduled ones count: a failed one by hand says nothing of the schedule.
        assert_eq!(
            summary(&seen(true, true, vec![ok.clone(), by_hand_failed])),
            pair("True", "SnapshotsScheduled")
        );
        // Labelled scheduled by a user who may create MachineSnapshots, newer, failed, named
        // like the next run: says nothing of the schedule either.
        let forged = snap(
            "web-202601050200",
            true,
            json!({"phase": "Failed", "error": "forged", "creationTime": "2026-01-05T02:00:03Z"}),
        );
        let c = condition(&seen(true, true, vec![ok.clone(), forged.clone()])).expect("cond");
        assert_eq!(
            (c.status, c.reason.as_str()),
            ("True", "SnapshotsScheduled")
        );
        assert!(c.message.contains("web-202601020200"), "{}", c.message);
        let c = condition(&seen(true, true, vec![forged])).expect("cond");
        assert_eq!(c.message, "no scheduled snapshot yet");
        let c = condition(&seen(true, true, vec![failed])).expect("condition");
        assert!(
            c.message
                .contains("web-202601030200 failed: no VolumeSnapshotClass"),
            "{}",
            c.message
        );
    }
}
