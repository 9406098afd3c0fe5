//! The Events of provisioning steps.

use super::*;

fn previous(disks: &[(&str, &str)], storage_reason: Option<&str>) -> MachineStatus {
    let mut s = MachineStatus {
        disks: disks
            .iter()
            .map(|(n, p)| DiskStatus {
                name: (*n).into(),
                claim_name: format!("m-{n}"),
                phase: Some((*p).into()),
                progress: None,
                ..DiskStatus::default()
            })
            .collect(),
        ..Default::default()
    };
    if let Some(r) = storage_reason {
        s.conditions
            .push(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "StorageReady".into(),
                status: "False".into(),
                reason: r.into(),
                message: String::new(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                observed_generation: None,
            });
    }
    s
}

fn reasons(events: &[Event]) -> Vec<(bool, &str)> {
    events
        .iter()
        .map(|e| (e.warning, e.reason.as_str()))
        .collect()
}

#[test]
fn events_for_start_success_and_failure() {
    let (imp, cl) = (http(), pvc_clone());
    let run = |src: &DiskSource, prev: Option<&MachineStatus>, status: Value| {
        let d = dv(status);
        let bound = claim("Bound");
        let v = volume(src, Some(&d), Some(&bound));
        let now = [sourced_status(&v)];
        let verdict = verdict(std::slice::from_ref(&v), true);
        events(prev, std::slice::from_ref(&v), &now, verdict.as_ref())
    };
    let fresh = previous(&[], None);
    let started = run(&imp, Some(&fresh), json!({"phase": "ImportScheduled"}));
    assert_eq!(reasons(&started), [(false, "ImportStarted")]);
    assert_eq!(started[0].message, "disk root: ImportScheduled");
    assert_eq!(
        reasons(&run(&cl, None, json!({"phase": "CloneScheduled"}))),
        [(false, "CloneStarted")]
    );
    // Progress within a phase, and phase to phase while working, is not an Event.
    let scheduled = previous(&[("root", "ImportScheduled")], Some("ImportScheduled"));
    assert!(
        run(
            &imp,
            Some(&scheduled),
            json!({"phase": "ImportInProgress", "progress": "3%"})
        )
        .is_empty()
    );
    let ok = run(
        &imp,
        Some(&previous(
            &[("root", "ImportInProgress")],
            Some("ImportInProgress"),
        )),
        json!({"phase": "Succeeded"}),
    );
    assert_eq!(reasons(&ok), [(false, "ImportSucceeded")]);
    assert_eq!(ok[0].message, "disk root: DataVolume m-root succeeded");
    // Already succeeded before (e.g. after an operator restart): nothing new.
    assert!(
        run(
            &imp,
            Some(&previous(&[("root", "Succeeded")], Some("PVCBound"))),
            json!({"phase": "Succeeded"})
        )
        .is_empty()
    );
    let failed = json!({"phase": "Failed", "conditions": [{"type": "Running", "status": "False", "reason": "Error", "message": "404"}]});
    let failure = run(&imp, Some(&scheduled), failed.clone());
    assert_eq!(reasons(&failure), [(true, "ImportFailed")]);
    assert_eq!(failure[0].message, "disk root: ImportFailed (404)");
    // The same failure again is not a new Event.
    assert!(
        run(
            &imp,
            Some(&previous(&[("root", "Failed")], Some("ImportFailed"))),
            failed
        )
        .is_empty()
    );
}

#[test]
fn clones_and_pull_failures_have_their_events_too() {
    let (imp, cl) = (http(), pvc_clone());
    let run = |src: &DiskSource, prev: &MachineStatus, status: Value| {
        let d = dv(status);
        let bound = claim("Bound");
        let v = volume(src, Some(&d), Some(&bound));
        let now = [sourced_status(&v)];
        let verdict = verdict(std::slice::from_ref(&v), true);
        events(Some(prev), std::slice::from_ref(&v), &now, verdict.as_ref())
    };
    let cloning = previous(&[("root", "CloneInProgress")], Some("CloneInProgress"));
    let ok = run(&cl, &cloning, json!({"phase": "Succeeded"}));
    assert_eq!(reasons(&ok), [(false, "CloneSucceeded")]);
    let failed = run(&cl, &cloning, json!({"phase": "Failed"}));
    assert_eq!(reasons(&failed), [(true, "CloneFailed")]);

    let scheduled = previous(&[("root", "ImportScheduled")], Some("ImportScheduled"));
    let pull = json!({"phase": "ImportScheduled", "conditions": [{"type": "Running",
        "status": "False", "reason": "ImagePullBackOff", "message": "Back-off pulling image"}]});
    let pulled = run(&imp, &scheduled, pull);
    assert_eq!(reasons(&pulled), [(true, "ImagePullFailed")]);
    assert!(
        pulled[0].message.contains("Back-off pulling image"),
        "{}",
        pulled[0].message
    );
}
