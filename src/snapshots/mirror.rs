//! A MachineSnapshot's status, mirrored from its VirtualMachineSnapshot (pure, tests below).

use crate::api::snapshots::{MAX_ERROR, MAX_SNAPSHOT_DISKS, MachineSnapshotStatus, snapshot_phase};
use crate::reconciler::apis::snapshot::VirtualMachineSnapshot;

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
        machine_uid: base.machine_uid,
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
