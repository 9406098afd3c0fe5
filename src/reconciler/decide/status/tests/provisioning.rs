//! StorageReady with DataVolumes, and KubeVirt's `RestartRequired` on the Machine.

use super::*;

fn verdict(ready: bool, reason: &str, message: &str, waiting: bool) -> Verdict {
    Verdict {
        ready,
        reason: reason.into(),
        message: message.into(),
        waiting,
    }
}

fn disk(name: &str) -> DiskStatus {
    DiskStatus {
        name: name.into(),
        claim_name: format!("m-{name}"),
        phase: None,
        progress: None,
        ..DiskStatus::default()
    }
}

#[test]
fn refused_data_volume_writes_come_before_the_verdict() {
    let mut c = Case::new();
    c.provisioning = Some(verdict(false, "ImportInProgress", "disk root: …", true));
    c.disks = vec![disk("root")];
    let cdi = "User system:serviceaccount:op:op has insufficient permissions in clone source \
               namespace os-images";
    c.problems = vec![Problem::CloneUnauthorized {
        name: "m-root".into(),
        message: cdi.into(),
    }];
    let s = c.status(None, t(0));
    let storage = cond(&s, "StorageReady");
    assert_eq!(
        (storage.status.as_str(), storage.reason.as_str()),
        ("False", "CloneUnauthorized")
    );
    assert_eq!(
        storage.message,
        format!("DataVolume m-root: CDI refused the clone: {cdi}")
    );
    c.problems = vec![Problem::WriteFailed {
        kind: Kind::DataVolume,
        name: "m-root".into(),
        message: "Forbidden (403): nope".into(),
    }];
    let s = c.status(None, t(0));
    let storage = cond(&s, "StorageReady");
    assert_eq!(storage.reason, "DataVolumeFailed");
    assert_eq!(storage.message, "DataVolume m-root: Forbidden (403): nope");
}

#[test]
fn once_the_data_volumes_are_ready_the_blank_disks_claims_decide() {
    let (bound, pending) = (pvc(Some("Bound")), pvc(Some("Pending")));
    let mut c = Case::new();
    c.disks = vec![disk("data"), disk("root")];
    c.claims = vec![("m-data".into(), Some(&pending))];
    c.provisioning = Some(verdict(
        false,
        "ImportInProgress",
        "disk root: ImportInProgress 45.20%",
        true,
    ));
    let storage = cond(&c.status(None, t(0)), "StorageReady").clone();
    assert_eq!(storage.reason, "ImportInProgress");
    assert_eq!(storage.message, "disk root: ImportInProgress 45.20%");

    c.provisioning = Some(verdict(true, "DataVolumesReady", "", false));
    let storage = cond(&c.status(None, t(0)), "StorageReady").clone();
    assert_eq!(
        (storage.status.as_str(), storage.reason.as_str()),
        ("False", "PVCPending")
    );
    assert_eq!(
        storage.message,
        "Waiting for PersistentVolumeClaims to bind: m-data (Pending)"
    );

    c.claims = vec![("m-data".into(), Some(&bound))];
    let storage = cond(&c.status(None, t(0)), "StorageReady").clone();
    assert_eq!(
        (storage.status.as_str(), storage.reason.as_str()),
        ("True", "PVCBound")
    );
    // CDI's claim counts with the blank disk's.
    assert_eq!(storage.message, "All 2 PersistentVolumeClaims are bound");
}

#[test]
fn restart_required_is_kubevirts_condition_shown_while_it_holds() {
    let condition = |status: &str| {
        let mut v = vm(Some("Running"));
        if let Some(s) = v.status.as_mut() {
            s.conditions = vec![
                serde_json::from_value(json!({
                    "type": "RestartRequired", "status": status, "reason": "RestartRequired",
                    "message": "a non-live-updatable field was changed in the template spec"
                }))
                .unwrap(),
            ];
        }
        v
    };
    let (holds, cleared) = (condition("True"), condition("False"));
    let mut c = Case::new();
    c.vm = Some(&holds);
    let s = c.status(None, t(0));
    let r = cond(&s, "RestartRequired");
    assert_eq!(
        (r.status.as_str(), r.reason.as_str()),
        ("True", "RestartRequired")
    );
    assert_eq!(
        r.message,
        "a non-live-updatable field was changed in the template spec"
    );
    c.vm = Some(&cleared);
    let s = c.status(Some(&s), t(10));
    assert!(s.conditions.iter().all(|c| c.type_ != "RestartRequired"));
}
