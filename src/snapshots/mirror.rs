//! A MachineSnapshot's status, mirrored from its VirtualMachineSnapshot, and how soon one not
//! done is looked at again (pure, tests below).

use std::time::Duration;

use crate::api::snapshots::{
    MAX_ERROR, MAX_SNAPSHOT_DISKS, MachineSnapshotStatus, snapshot_phase, snapshot_reason,
};
use crate::reconciler::apis::snapshot::VirtualMachineSnapshot;

/// The first look again at a snapshot not done yet, and the longest wait between two looks.
pub const FIRST_LOOK: Duration = Duration::from_secs(10);
pub const MAX_LOOK: Duration = Duration::from_secs(5 * 60);

/// What to do with a snapshot still waiting for its Machine's VM after `age`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Look again after this long.
    Again(Duration),
    /// Waited `limit`: fail it.
    GiveUp,
}

/// Snapshots not done are looked at again with exponential backoff: after as long as they have
/// existed (so each wait doubles), from [`FIRST_LOOK`] up to [`MAX_LOOK`].
pub fn look_again(age: Duration) -> Duration {
    age.clamp(FIRST_LOOK, MAX_LOOK)
}

/// A snapshot whose Machine has no VM (or whose cluster cannot be worked on) after `age`: looked
/// at again with backoff, failed once it has waited `limit`.
pub fn waiting(age: Duration, limit: Duration) -> Waiting {
    if age >= limit {
        return Waiting::GiveUp;
    }
    Waiting::Again(look_again(age).min(limit - age))
}

/// Failed for waiting `limit` for Machine `machine`'s VM.
pub fn gave_up(machine: &str, machine_uid: Option<&str>, limit: Duration) -> MachineSnapshotStatus {
    let why = format!(
        "Machine {machine} had no VM on its cluster for {}s",
        limit.as_secs()
    );
    MachineSnapshotStatus {
        reason: Some(snapshot_reason::NO_VM.to_owned()),
        ..status(None, machine_uid, None, Some(why))
    }
}

/// A snapshot not taken yet whose Machine's remote cluster cannot be worked on (`reason`,
/// `why`): `Pending` saying so, or `Failed` once it waited `limit` or at once when `refused`.
pub fn cluster_waits(
    reason: &str,
    why: &str,
    machine_uid: Option<&str>,
    (age, limit, refused): (Duration, Duration, bool),
) -> MachineSnapshotStatus {
    let gave_up = refused || waiting(age, limit) == Waiting::GiveUp;
    let why = why.to_owned();
    let (waits, fails) = if gave_up {
        (None, Some(why))
    } else {
        (Some(why), None)
    };
    MachineSnapshotStatus {
        reason: Some(reason.to_owned()),
        ..status(None, machine_uid, waits, fails)
    }
}

/// When a snapshot not done is looked at again: with backoff ([`look_again`]) when KubeVirt's
/// changes wake it (its VirtualMachineSnapshot is watched on the operator's cluster), and at
/// least every `tick` on a remote cluster (not watched: read at each look).
pub fn next_look(age: Duration, remote: bool, tick: Duration) -> Duration {
    match remote {
        true => look_again(age).min(tick),
        false => look_again(age),
    }
}

/// What a MachineSnapshot shows: `vm_snapshot` as KubeVirt reports it, or `Pending` with
/// `waiting` (why there is none yet), or `Failed` with `failed` (why there never will be).
pub fn status(
    vm_snapshot: Option<&VirtualMachineSnapshot>,
    machine_uid: Option<&str>,
    waiting: Option<String>,
    failed: Option<String>,
) -> MachineSnapshotStatus {
    let base = MachineSnapshotStatus {
        machine_uid: machine_uid.map(str::to_owned),
        ..MachineSnapshotStatus::default()
    };
    if let Some(why) = failed {
        return MachineSnapshotStatus {
            phase: Some(snapshot_phase::FAILED.to_owned()),
            ready_to_use: Some(false),
            error: Some(cut(why)),
            ..base
        };
    }
    let Some(snap) = vm_snapshot else {
        return MachineSnapshotStatus {
            phase: Some(snapshot_phase::PENDING.to_owned()),
            ready_to_use: Some(false),
            error: waiting.map(cut),
            ..base
        };
    };
    let s = snap.status.clone().unwrap_or_default();
    let phase = match s.phase.as_deref() {
        Some(p @ (snapshot_phase::SUCCEEDED | snapshot_phase::FAILED)) => p,
        Some("InProgress") => snapshot_phase::IN_PROGRESS,
        // Unknown or not reported yet.
        _ => snapshot_phase::PENDING,
    };
    let mut disks: Vec<String> = s
        .snapshot_volumes
        .map(|v| v.included_volumes)
        .unwrap_or_default();
    disks.truncate(MAX_SNAPSHOT_DISKS);
    MachineSnapshotStatus {
        phase: Some(phase.to_owned()),
        ready_to_use: Some(s.ready_to_use.unwrap_or(false)),
        creation_time: s.creation_time,
        disks,
        error: s.error.and_then(|e| e.message).map(cut),
        virtual_machine_snapshot_name: snap.metadata.name.clone(),
        ..base
    }
}

/// At most [`MAX_ERROR`] bytes, cut on a character boundary.
pub fn cut(mut s: String) -> String {
    if s.len() > MAX_ERROR {
        let mut end = MAX_ERROR;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vm_snapshot(status: serde_json::Value) -> VirtualMachineSnapshot {
        serde_json::from_value(json!({
            "apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshot",
            "metadata": {"name": "vmsnap", "namespace": "ns"},
            "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "web"}},
            "status": status
        }))
        .expect("VirtualMachineSnapshot")
    }

    #[test]
    fn the_status_follows_kubevirt() {
        let cases = [
            (
                "none yet",
                None,
                (Some("Pending"), Some(false), vec![], None),
            ),
            (
                "no status yet",
                Some(vm_snapshot(json!({}))),
                (Some("Pending"), Some(false), vec![], None),
            ),
            (
                "in progress",
                Some(vm_snapshot(
                    json!({"phase": "InProgress", "readyToUse": false}),
                )),
                (Some("InProgress"), Some(false), vec![], None),
            ),
            (
                "succeeded",
                Some(vm_snapshot(json!({
                    "phase": "Succeeded", "readyToUse": true,
                    "creationTime": "2026-01-01T02:00:03Z",
                    "snapshotVolumes": {"includedVolumes": ["root", "data"]}}))),
                (
                    Some("Succeeded"),
                    Some(true),
                    vec!["root".to_owned(), "data".to_owned()],
                    None,
                ),
            ),
            (
                "failed",
                Some(vm_snapshot(json!({
                    "phase": "Failed", "readyToUse": false,
                    "error": {"message": "no VolumeSnapshotClass for storage class standard"}}))),
                (
                    Some("Failed"),
                    Some(false),
                    vec![],
                    Some("no VolumeSnapshotClass for storage class standard"),
                ),
            ),
        ];
        for (case, snap, (phase, ready, disks, error)) in cases {
            let s = status(snap.as_ref(), Some("uid-m"), None, None);
            assert_eq!(s.phase.as_deref(), phase, "{case}");
            assert_eq!(s.ready_to_use, ready, "{case}");
            assert_eq!(s.disks, disks, "{case}");
            assert_eq!(s.error.as_deref(), error, "{case}");
            assert_eq!(s.machine_uid.as_deref(), Some("uid-m"), "{case}");
            assert_eq!(
                s.virtual_machine_snapshot_name.is_some(),
                snap.is_some(),
                "{case}"
            );
        }
        let t = status(
            Some(&vm_snapshot(
                json!({"creationTime": "2026-01-01T02:00:03Z"}),
            )),
            None,
            None,
            None,
        );
        assert_eq!(
            t.creation_time.map(|t| t.0.to_string()),
            Some("2026-01-01T02:00:03Z".to_owned())
        );
    }

    #[test]
    fn a_snapshot_waiting_for_a_vm_backs_off_then_fails() {
        let s = Duration::from_secs;
        let limit = s(1800);
        // (age, next)
        let cases = [
            (s(0), Waiting::Again(s(10))),
            (s(3), Waiting::Again(s(10))),
            (s(10), Waiting::Again(s(10))),
            (s(20), Waiting::Again(s(20))),
            (s(160), Waiting::Again(s(160))),
            (s(299), Waiting::Again(s(299))),
            (s(1000), Waiting::Again(s(300))),
            (s(1700), Waiting::Again(s(100))),
            (s(1800), Waiting::GiveUp),
            (s(90_000), Waiting::GiveUp),
        ];
        for (age, next) in cases {
            assert_eq!(waiting(age, limit), next, "{age:?}");
        }
        // Each wait doubles the age: from creation, fewer than 20 looks in half an hour.
        let (mut age, mut looks) = (Duration::ZERO, 0);
        while let Waiting::Again(d) = waiting(age, limit) {
            age += d;
            looks += 1;
        }
        assert!(looks < 20, "{looks}");
        let failed = gave_up("web", Some("uid-m"), limit);
        assert_eq!(failed.phase.as_deref(), Some("Failed"));
        assert_eq!(failed.reason.as_deref(), Some("NoVM"));
        assert_eq!(failed.machine_uid.as_deref(), Some("uid-m"));
        assert!(failed.error.is_some_and(|e| e.contains("for 1800s")));
    }

    #[test]
    fn a_snapshot_waits_for_its_cluster_then_fails_with_its_reason() {
        let s = Duration::from_secs;
        let limit = s(1800);
        // (reason, age, refused, phase)
        let cases = [
            ("Unreachable", s(0), false, "Pending"),
            ("ClusterChanged", s(1799), false, "Pending"),
            ("Unreachable", s(1800), false, "Failed"),
            ("PlacementForbidden", s(0), true, "Failed"),
        ];
        for (reason, age, refused, phase) in cases {
            let st = cluster_waits(
                reason,
                "cluster dc1: why",
                Some("uid-m"),
                (age, limit, refused),
            );
            assert_eq!(st.phase.as_deref(), Some(phase), "{reason} {age:?}");
            assert_eq!(st.reason.as_deref(), Some(reason));
            assert_eq!(st.error.as_deref(), Some("cluster dc1: why"));
            assert_eq!(st.machine_uid.as_deref(), Some("uid-m"));
        }
        // (age, remote, next): a remote snapshot is read at least every tick.
        let tick = s(5);
        for (age, remote, next) in [
            (s(0), false, s(10)),
            (s(1000), false, s(300)),
            (s(0), true, s(5)),
            (s(1000), true, s(5)),
        ] {
            assert_eq!(next_look(age, remote, tick), next, "{age:?} {remote}");
        }
    }

    #[test]
    fn waiting_and_failing_say_why() {
        let s = status(None, None, Some("Machine web has no VM yet".into()), None);
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(s.error.as_deref(), Some("Machine web has no VM yet"));
        let long = "é".repeat(MAX_ERROR);
        let s = status(None, None, None, Some(long));
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        let error = s.error.expect("error");
        assert!(error.len() <= MAX_ERROR && error.starts_with('é'));
    }
}
