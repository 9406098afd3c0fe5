use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;

fn vmi(status: serde_json::Value) -> VirtualMachineInstanceStatus {
    serde_json::from_value(status).expect("VMI status")
}

fn at(s: &str) -> Option<Time> {
    serde_json::from_value(json!(s)).ok()
}

#[test]
fn the_migration_phase_follows_kubevirts_migration_state() {
    let state = |extra: serde_json::Value| {
        let mut m = json!({"sourceNode": "n1", "targetNode": "n2",
                           "startTimestamp": "2026-11-25T10:00:00Z", "migrationUid": "u"});
        m.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        status(&vmi(json!({"migrationState": m}))).expect("a migration")
    };
    let running = state(json!({}));
    assert_eq!(running.phase.as_deref(), Some("Running"));
    assert_eq!(running.source_node.as_deref(), Some("n1"));
    assert_eq!(running.target_node.as_deref(), Some("n2"));
    assert_eq!(running.started_at, at("2026-11-25T10:00:00Z"));
    let done = state(json!({"completed": true, "endTimestamp": "2026-11-25T10:01:00Z"}));
    assert_eq!(done.phase.as_deref(), Some("Succeeded"));
    assert_eq!(done.ended_at, at("2026-11-25T10:01:00Z"));
    let failed = state(json!({"completed": true, "failed": true}));
    assert_eq!(failed.phase.as_deref(), Some("Failed"), "failed wins");
    assert_eq!(status(&vmi(json!({"phase": "Running"}))), None);
}

#[test]
fn live_migratable_is_kubevirts_own_condition() {
    let s = vmi(json!({"conditions": [
        {"type": "Ready", "status": "True"},
        {"type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable",
         "message": "cannot migrate VMI: PVC m-root is not shared"}]}));
    let c = live_migratable(&s).expect("reported");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("DisksNotLiveMigratable"))
    );
    assert!(live_migratable(&vmi(json!({}))).is_none());
}

#[test]
fn each_step_of_a_migration_earns_one_event() {
    let m = |phase: &str, start: &str| MigrationStatus {
        phase: Some(phase.into()),
        source_node: Some("n1".into()),
        target_node: Some("n2".into()),
        started_at: at(start),
        ended_at: None,
    };
    let reasons = |old: Option<&MigrationStatus>, new: Option<&MigrationStatus>| {
        events(old, new)
            .into_iter()
            .map(|(t, r, note)| format!("{t:?} {r}: {note}"))
            .collect::<Vec<_>>()
    };
    let t0 = "2026-11-25T10:00:00Z";
    let running = m("Running", t0);
    let done = m("Succeeded", t0);
    assert_eq!(
        reasons(None, Some(&running)),
        ["Normal MigrationStarted: live migration from n1 to n2 started"]
    );
    assert!(reasons(Some(&running), Some(&running)).is_empty(), "once");
    assert_eq!(
        reasons(Some(&running), Some(&done)),
        ["Normal MigrationSucceeded: live migration from n1 to n2 succeeded"]
    );
    assert!(reasons(Some(&done), Some(&done)).is_empty(), "once");
    assert_eq!(
        reasons(Some(&running), Some(&m("Failed", t0))),
        ["Warning MigrationFailed: live migration from n1 to n2 failed"]
    );
    // A new migration after the last one ended: started again.
    assert_eq!(
        reasons(Some(&done), Some(&m("Running", "2026-11-25T11:00:00Z"))),
        ["Normal MigrationStarted: live migration from n1 to n2 started"]
    );
    // First seen already over (the operator was down): its end only.
    assert_eq!(
        reasons(None, Some(&done)),
        ["Normal MigrationSucceeded: live migration from n1 to n2 succeeded"]
    );
    assert!(reasons(Some(&done), None).is_empty());
}
