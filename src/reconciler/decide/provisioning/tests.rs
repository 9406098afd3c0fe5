//! CDI's phases, progress and conditions to disk status, StorageReady and Events.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimStatus};
use serde_json::{Value, json};

use super::*;
use crate::api::source::DiskSource;
use crate::reconciler::decide::volumes::blank_status;

fn source(v: Value) -> DiskSource {
    serde_json::from_value(v).unwrap()
}

fn dv(status: Value) -> DataVolume {
    serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "metadata": {"name": "m-root", "namespace": "ns"},
        "spec": {}, "status": status
    }))
    .unwrap()
}

fn claim(phase: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        status: Some(PersistentVolumeClaimStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn http() -> DiskSource {
    source(json!({"http": {"url": "https://a/b.qcow2"}}))
}

fn pvc_clone() -> DiskSource {
    source(json!({"pvc": {"name": "golden", "namespace": "os"}}))
}

fn volume<'a>(
    src: &'a DiskSource,
    dv: Option<&'a DataVolume>,
    claim: Option<&'a PersistentVolumeClaim>,
) -> Sourced<'a> {
    Sourced {
        label: "disk root".into(),
        name: "root",
        claim_name: "m-root".into(),
        source: src,
        data_volume: dv,
        claim,
    }
}

fn one(v: Sourced) -> (bool, String, String) {
    let verdict = verdict(&[v], true).expect("a verdict");
    (verdict.ready, verdict.reason, verdict.message)
}

/// (source, DataVolume status, claim, expected (ready, reason, message)).
type Row<'a> = (
    &'a DiskSource,
    Option<Value>,
    Option<&'a PersistentVolumeClaim>,
    (bool, String, String),
);

fn f(reason: &str, message: &str) -> (bool, String, String) {
    (false, reason.to_owned(), message.to_owned())
}

#[test]
fn cdi_phases_to_storage_ready() {
    let (imp, cl) = (http(), pvc_clone());
    let bound = claim("Bound");
    let pending = claim("Pending");
    let table: Vec<Row> = vec![
        (
            &imp,
            None,
            None,
            f("DataVolumePending", "disk root: DataVolumePending"),
        ),
        (
            &imp,
            Some(json!({})),
            None,
            f("DataVolumePending", "disk root: DataVolumePending"),
        ),
        (
            &imp,
            Some(json!({"phase": "Pending"})),
            None,
            f("DataVolumePending", "disk root: DataVolumePending Pending"),
        ),
        (
            &imp,
            Some(json!({"phase": "ImportScheduled", "progress": "N/A"})),
            None,
            f("ImportScheduled", "disk root: ImportScheduled"),
        ),
        (
            &imp,
            Some(json!({"phase": "ImportInProgress", "progress": "45.20%"})),
            Some(&bound),
            f("ImportInProgress", "disk root: ImportInProgress 45.20%"),
        ),
        (
            &imp,
            Some(json!({"phase": "WaitForFirstConsumer"})),
            Some(&pending),
            f(
                "WaitForFirstConsumer",
                "disk root: WaitForFirstConsumer (CDI starts once the VM's pod is scheduled)",
            ),
        ),
        (
            &cl,
            Some(json!({"phase": "CloneInProgress", "progress": "12.00%"})),
            None,
            f("CloneInProgress", "disk root: CloneInProgress 12.00%"),
        ),
        (
            &cl,
            Some(json!({"phase": "CSICloneInProgress"})),
            None,
            f("CSICloneInProgress", "disk root: CSICloneInProgress"),
        ),
        (
            &imp,
            Some(json!({"phase": "Succeeded", "progress": "100.0%"})),
            Some(&pending),
            f(
                "PVCPending",
                "disk root: PVCPending (claim m-root not bound yet)",
            ),
        ),
        (
            &imp,
            Some(json!({"phase": "Succeeded", "progress": "100.0%"})),
            None,
            f(
                "PVCPending",
                "disk root: PVCPending (claim m-root not bound yet)",
            ),
        ),
        (
            &imp,
            Some(json!({"phase": "Succeeded", "progress": "100.0%"})),
            Some(&bound),
            (
                true,
                "DataVolumesReady".into(),
                "disk root imported or cloned and bound".into(),
            ),
        ),
        // Failures.
        (
            &imp,
            Some(
                json!({"phase": "Failed", "conditions": [{"type": "Running", "status": "False", "reason": "Error", "message": "Unable to connect to http data source: 404 Not Found"}]}),
            ),
            None,
            f(
                "ImportFailed",
                "disk root: ImportFailed (Unable to connect to http data source: 404 Not Found)",
            ),
        ),
        (
            &cl,
            Some(json!({"phase": "Failed"})),
            None,
            f("CloneFailed", "disk root: CloneFailed"),
        ),
        (
            &imp,
            Some(
                json!({"phase": "ImportInProgress", "restartCount": 3, "conditions": [{"type": "Running", "status": "False", "reason": "Error", "message": "Unable to process data: qemu-img: Could not open"}]}),
            ),
            None,
            f(
                "ImportFailed",
                "disk root: ImportFailed (Unable to process data: qemu-img: Could not open) after 3 restarts; CDI retries",
            ),
        ),
        (
            &imp,
            Some(
                json!({"phase": "ImportInProgress", "conditions": [{"type": "Running", "status": "False", "reason": "CrashLoopBackOff"}]}),
            ),
            None,
            f("ImportFailed", "disk root: ImportFailed (CrashLoopBackOff)"),
        ),
        (
            &imp,
            Some(
                json!({"phase": "ImportScheduled", "conditions": [{"type": "Running", "status": "False", "reason": "ImagePullBackOff", "message": "Back-off pulling image \"quay.io/x\""}]}),
            ),
            None,
            f(
                "ImagePullFailed",
                "disk root: ImagePullFailed (Back-off pulling image \"quay.io/x\")",
            ),
        ),
        (
            &imp,
            Some(
                json!({"phase": "ImportScheduled", "conditions": [{"type": "Running", "status": "False", "reason": "ErrImagePull"}]}),
            ),
            None,
            f(
                "ImagePullFailed",
                "disk root: ImagePullFailed (ErrImagePull)",
            ),
        ),
        (
            &cl,
            Some(
                json!({"phase": "CloneScheduled", "conditions": [{"type": "Bound", "status": "False", "reason": "CloneWithoutSource", "message": "The source pvc golden doesn't exist"}]}),
            ),
            None,
            f(
                "SourceNotFound",
                "disk root: SourceNotFound (The source pvc golden doesn't exist)",
            ),
        ),
        // A clone's worker failing is the clone's failure.
        (
            &cl,
            Some(
                json!({"phase": "CloneInProgress", "conditions": [{"type": "Running", "status": "False", "reason": "Error", "message": "source pod failed"}]}),
            ),
            None,
            f("CloneFailed", "disk root: CloneFailed (source pod failed)"),
        ),
        // CDI's own word for a pull failure.
        (
            &imp,
            Some(
                json!({"phase": "ImportScheduled", "conditions": [{"type": "Running", "status": "False", "reason": "ImagePullFailed", "message": "no such image"}]}),
            ),
            None,
            f(
                "ImagePullFailed",
                "disk root: ImagePullFailed (no such image)",
            ),
        ),
        // A Running condition that is fine does not count as a failure.
        (
            &imp,
            Some(
                json!({"phase": "ImportInProgress", "progress": "1.00%", "conditions": [{"type": "Running", "status": "True", "reason": "Pod is running"}]}),
            ),
            None,
            f("ImportInProgress", "disk root: ImportInProgress 1.00%"),
        ),
    ];
    for (src, status, claim, want) in table {
        let d = status.clone().map(dv);
        assert_eq!(one(volume(src, d.as_ref(), claim)), want, "{status:?}");
    }
}

#[test]
fn a_failed_import_heals_when_the_data_volume_recovers() {
    let src = http();
    let failing = dv(
        json!({"phase": "ImportInProgress", "restartCount": 1, "conditions": [{"type": "Running", "status": "False", "reason": "Error", "message": "timeout"}]}),
    );
    assert_eq!(one(volume(&src, Some(&failing), None)).1, "ImportFailed");
    let recovered = dv(
        json!({"phase": "ImportInProgress", "progress": "80.00%", "restartCount": 1, "conditions": [{"type": "Running", "status": "True"}]}),
    );
    assert_eq!(
        one(volume(&src, Some(&recovered), None)).1,
        "ImportInProgress"
    );
}

#[test]
fn without_cdi_only_machines_with_sources_are_held() {
    assert_eq!(verdict(&[], false), None, "no sources: CDI does not matter");
    let src = http();
    let v = verdict(&[volume(&src, None, None)], false).unwrap();
    assert_eq!(
        (v.ready, v.reason.as_str(), v.waiting),
        (false, "CDINotInstalled", false)
    );
    assert!(v.message.contains("disk root"), "{}", v.message);
}

#[test]
fn failures_come_before_work_and_every_unready_volume_is_named() {
    let (imp, cl) = (http(), pvc_clone());
    let working = dv(json!({"phase": "ImportInProgress", "progress": "45.20%"}));
    let broken = dv(json!({"phase": "Failed"}));
    let done = dv(json!({"phase": "Succeeded"}));
    let bound = claim("Bound");
    let mut a = volume(&imp, Some(&working), None);
    a.label = "disk root".into();
    let mut b = volume(&cl, Some(&broken), None);
    b.label = "cdrom installer".into();
    let mut c = volume(&imp, Some(&done), Some(&bound));
    c.label = "disk data".into();
    let v = verdict(&[a, b, c], true).unwrap();
    assert_eq!(v.reason, "CloneFailed");
    assert!(!v.waiting);
    assert_eq!(v.message, "cdrom installer: CloneFailed");
    let a = volume(&imp, Some(&working), None);
    let v = verdict(&[a], true).unwrap();
    assert!(v.waiting, "an import in progress is something to wait for");

    // Every failing volume is named; the first gives the reason.
    let mut a = volume(&imp, Some(&broken), None);
    a.label = "disk root".into();
    let mut b = volume(&cl, Some(&broken), None);
    b.label = "cdrom installer".into();
    let v = verdict(&[a, b], true).unwrap();
    assert_eq!(v.reason, "ImportFailed");
    assert_eq!(
        v.message,
        "disk root: ImportFailed; cdrom installer: CloneFailed"
    );
    // Likewise the volumes still working.
    let scheduled = dv(json!({"phase": "CloneScheduled"}));
    let mut a = volume(&cl, Some(&scheduled), None);
    a.label = "disk root".into();
    let mut b = volume(&imp, Some(&working), None);
    b.label = "disk data".into();
    let v = verdict(&[a, b], true).unwrap();
    assert_eq!(v.reason, "CloneScheduled");
    assert_eq!(
        v.message,
        "disk root: CloneScheduled; disk data: ImportInProgress 45.20%"
    );
}

#[test]
fn disk_statuses() {
    let src = http();
    let d = dv(json!({"phase": "ImportInProgress", "progress": "45.20%"}));
    assert_eq!(
        sourced_status(&volume(&src, Some(&d), None)),
        DiskStatus {
            name: "root".into(),
            claim_name: "m-root".into(),
            phase: Some("ImportInProgress".into()),
            progress: Some("45.20%".into()),
            ..DiskStatus::default()
        }
    );
    let d = dv(json!({"phase": "ImportScheduled", "progress": "N/A"}));
    assert_eq!(sourced_status(&volume(&src, Some(&d), None)).progress, None);
    assert_eq!(sourced_status(&volume(&src, None, None)).phase, None);
    let bound = claim("Bound");
    assert_eq!(
        blank_status("data", "m-data", Some(&bound)),
        DiskStatus {
            name: "data".into(),
            claim_name: "m-data".into(),
            phase: Some("Bound".into()),
            progress: None,
            ..DiskStatus::default()
        }
    );
}

fn vm(status: Value) -> VirtualMachine {
    serde_json::from_value(json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "m"}, "spec": {"template": {"spec": {"domain": {"devices": {}}}}}, "status": status})).unwrap()
}

#[test]
fn vm_status_mirrors_kubevirt() {
    assert_eq!(vm_status(None), None);
    let v = vm(json!({"printableStatus": "Provisioning"}));
    assert_eq!(vm_status(Some(&v)).as_deref(), Some("Provisioning"));
}

mod events;
