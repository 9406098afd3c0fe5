use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use super::super::evidence::Target;
use super::*;
use crate::api::names::PROOF_ANNOTATION;

const PVC: &str = "PersistentVolumeClaim";
const KEY_MADE: &str = "2026-06-01T00:00:00Z";
const AFTER: &str = "2026-07-01T00:00:00Z";
const BEFORE: &str = "2026-05-01T00:00:00Z";

fn key() -> OwnershipKey {
    let made: Timestamp = KEY_MADE.parse().expect("time");
    OwnershipKey::new(&[42; 32], Some(made)).expect("key")
}

/// What a claim `m-root` (uid `uid-c`) carries.
#[derive(Clone, Copy, Default)]
struct Claim {
    /// A proof made for (Machine name, Machine uid) by our key.
    proof: Option<(&'static str, &'static str)>,
    /// A proof made by another key (a tenant guessing).
    forged_proof: bool,
    /// (owner uid, is controller)
    owner: Option<(&'static str, bool)>,
    labels_for: Option<&'static str>,
    created: Option<&'static str>,
    deleting: bool,
}

fn meta(c: Claim) -> ObjectMeta {
    let mut annotations = BTreeMap::new();
    let target = Target {
        kind: PVC,
        namespace: "ns",
        name: "m-root",
        uid: "uid-c",
    };
    if let Some((machine, uid)) = c.proof {
        annotations.insert(
            PROOF_ANNOTATION.to_owned(),
            key().proof(&target, machine, uid),
        );
    }
    if c.forged_proof {
        let other = OwnershipKey::new(&[1; 32], None).expect("key");
        annotations.insert(
            PROOF_ANNOTATION.to_owned(),
            other.proof(&target, "m", "uid-m"),
        );
    }
    ObjectMeta {
        name: Some("m-root".into()),
        namespace: Some("ns".into()),
        uid: Some("uid-c".into()),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: c.owner.map(|(uid, controller)| {
            vec![OwnerReference {
                uid: uid.into(),
                controller: Some(controller),
                ..OwnerReference::default()
            }]
        }),
        labels: c.labels_for.map(|m| {
            BTreeMap::from([
                (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
                (MACHINE_LABEL.to_owned(), m.to_owned()),
            ])
        }),
        creation_timestamp: Some(Time(c.created.unwrap_or(AFTER).parse().expect("time"))),
        deletion_timestamp: c.deleting.then(|| Time(AFTER.parse().expect("time"))),
        ..ObjectMeta::default()
    }
}

const M: MachineRef = MachineRef {
    name: "m",
    uid: Some("uid-m"),
};

#[test]
fn every_kind_of_evidence() {
    use Ownership::*;
    let c = Claim::default;
    // (case, claim, expected): a claim may be written unless Foreign, a VM or Secret only if Ours.
    let cases: &[(&str, Claim, Ownership)] = &[
        (
            "ours: our proof for this Machine",
            Claim {
                proof: Some(("m", "uid-m")),
                owner: Some(("uid-m", true)),
                ..c()
            },
            Ours,
        ),
        (
            "ours, retain-disks: no owner reference at all",
            Claim {
                proof: Some(("m", "uid-m")),
                ..c()
            },
            Ours,
        ),
        (
            "released by us: a gone Machine of this name, nothing holds it",
            Claim {
                proof: Some(("m", "uid-old")),
                labels_for: Some("m"),
                ..c()
            },
            Released,
        ),
        (
            "failed adoption: still the old Machine's proof",
            Claim {
                proof: Some(("m", "uid-old")),
                ..c()
            },
            Released,
        ),
        (
            "made for the previous Machine, which still holds it",
            Claim {
                proof: Some(("m", "uid-old")),
                owner: Some(("uid-old", true)),
                ..c()
            },
            Foreign,
        ),
        (
            "made for the previous Machine, being deleted",
            Claim {
                proof: Some(("m", "uid-old")),
                deleting: true,
                ..c()
            },
            Foreign,
        ),
        (
            "forged labels",
            Claim {
                labels_for: Some("m"),
                ..c()
            },
            Foreign,
        ),
        (
            "forged controller reference to the Machine's uid, and labels",
            Claim {
                owner: Some(("uid-m", true)),
                labels_for: Some("m"),
                ..c()
            },
            Foreign,
        ),
        (
            "a proof made with another key",
            Claim {
                forged_proof: true,
                owner: Some(("uid-m", true)),
                ..c()
            },
            Foreign,
        ),
        (
            "conflicting: made by us for another Machine (a + b-root vs a-b + root)",
            Claim {
                proof: Some(("m-x", "uid-x")),
                owner: Some(("uid-x", true)),
                ..c()
            },
            Foreign,
        ),
        ("someone else's", c(), Foreign),
        (
            "older than the key, controlled by the Machine: the second edition's ours",
            Claim {
                owner: Some(("uid-m", true)),
                created: Some(BEFORE),
                ..c()
            },
            Ours,
        ),
        (
            "older than the key, labelled without controller: released",
            Claim {
                labels_for: Some("m"),
                created: Some(BEFORE),
                ..c()
            },
            Released,
        ),
        (
            "older than the key, another's controller",
            Claim {
                owner: Some(("uid-x", true)),
                labels_for: Some("m"),
                created: Some(BEFORE),
                ..c()
            },
            Foreign,
        ),
        (
            "older than the key, unlabelled",
            Claim {
                created: Some(BEFORE),
                ..c()
            },
            Foreign,
        ),
    ];
    for (case, claim, want) in cases {
        let got = of_meta(Some(&meta(*claim)), PVC, M, &key());
        assert_eq!(got, *want, "{case}");
        assert_eq!(got.writable(true), *want != Foreign, "{case}: claim");
        assert_eq!(got.writable(false), *want == Ours, "{case}: VM/Secret");
    }
    assert_eq!(of_meta(None, PVC, M, &key()), Absent);
    assert!(Absent.writable(false));
    // A proof for a PersistentVolumeClaim says nothing about another kind.
    let ours = meta(Claim {
        proof: Some(("m", "uid-m")),
        ..Claim::default()
    });
    assert_eq!(of_meta(Some(&ours), "DataVolume", M, &key()), Foreign);
}

#[test]
fn attachments() {
    use Ownership::*;
    let managed = || BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())]);
    let nad = |owner: Option<&str>, labelled: bool| ObjectMeta {
        name: Some("lan".into()),
        owner_references: owner.map(|uid| {
            vec![OwnerReference {
                uid: uid.into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]
        }),
        labels: labelled.then(managed),
        ..ObjectMeta::default()
    };
    let cases = [
        (nad(Some("uid-nc"), true), Ours),
        (nad(Some("uid-nc"), false), Foreign),
        (nad(Some("uid-other"), true), Foreign),
        (nad(None, true), Foreign),
        (nad(None, false), Foreign),
    ];
    for (i, (m, want)) in cases.iter().enumerate() {
        assert_eq!(of_attachment(Some(m), Some("uid-nc")), *want, "case {i}");
    }
    assert_eq!(of_attachment(None, Some("uid-nc")), Absent);
    // The NetworkConfiguration is gone: a reference to one of the attachment's name is ours.
    let mut m = nad(Some("uid-gone"), true);
    assert_eq!(
        of_attachment(Some(&m), None),
        Foreign,
        "not a NetworkConfiguration"
    );
    if let Some(r) = m.owner_references.as_mut().and_then(|r| r.first_mut()) {
        r.kind = "NetworkConfiguration".into();
        r.name = "lan".into();
    }
    assert_eq!(of_attachment(Some(&m), None), Ours);
    m.labels = None;
    assert_eq!(of_attachment(Some(&m), None), Foreign, "not labelled ours");
}

#[test]
fn a_vmi_counts_only_when_its_vm_controls_it() {
    let vmi = |owner: Option<(&str, bool)>| ObjectMeta {
        owner_references: owner.map(|(uid, controller)| {
            vec![OwnerReference {
                uid: uid.into(),
                controller: Some(controller),
                ..OwnerReference::default()
            }]
        }),
        ..ObjectMeta::default()
    };
    assert!(controlled_by(&vmi(Some(("uid-vm", true))), Some("uid-vm")));
    assert!(!controlled_by(
        &vmi(Some(("uid-vm", false))),
        Some("uid-vm")
    ));
    assert!(!controlled_by(&vmi(None), Some("uid-vm")));
    assert!(!controlled_by(&vmi(Some(("uid-x", true))), Some("uid-vm")));
    assert!(!controlled_by(&vmi(None), None));
}
