use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use super::super::evidence::Target;
use super::*;
use crate::api::names::{PROOF_ANNOTATION, RELEASE_ANNOTATION};

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
    /// A made-for proof for (Machine name, Machine uid) by our key.
    made: Option<(&'static str, &'static str)>,
    /// A release proof by our key for (Machine name, the uid it was made on): `uid-c` is this
    /// very claim, anything else a proof copied from another object.
    released: Option<(&'static str, &'static str)>,
    /// Proofs made by another key (a tenant guessing).
    forged_proofs: bool,
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
    };
    if let Some((machine, uid)) = c.made {
        annotations.insert(
            PROOF_ANNOTATION.to_owned(),
            key().proof(&target, machine, uid),
        );
    }
    if let Some((machine, on_uid)) = c.released {
        annotations.insert(
            RELEASE_ANNOTATION.to_owned(),
            key().release_proof(&target, on_uid, machine),
        );
    }
    if c.forged_proofs {
        let other = OwnershipKey::new(&[1; 32], None).expect("key");
        annotations.insert(
            PROOF_ANNOTATION.to_owned(),
            other.proof(&target, "m", "uid-m"),
        );
        annotations.insert(
            RELEASE_ANNOTATION.to_owned(),
            other.release_proof(&target, "uid-c", "m"),
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
                made: Some(("m", "uid-m")),
                owner: Some(("uid-m", true)),
                ..c()
            },
            Ours,
        ),
        (
            "ours, retain-disks: no owner reference at all",
            Claim {
                made: Some(("m", "uid-m")),
                ..c()
            },
            Ours,
        ),
        (
            "ours after an adoption (its release proof stays)",
            Claim {
                made: Some(("m", "uid-m")),
                released: Some(("m", "uid-c")),
                ..c()
            },
            Ours,
        ),
        (
            "released by us: this very claim, for a gone Machine of this name",
            Claim {
                made: Some(("m", "uid-old")),
                released: Some(("m", "uid-c")),
                labels_for: Some("m"),
                ..c()
            },
            Released,
        ),
        (
            "failed adoption: still the old Machine's proofs",
            Claim {
                made: Some(("m", "uid-old")),
                released: Some(("m", "uid-c")),
                ..c()
            },
            Released,
        ),
        (
            "released, but its earlier Machine references it again",
            Claim {
                made: Some(("m", "uid-old")),
                released: Some(("m", "uid-c")),
                owner: Some(("uid-old", true)),
                ..c()
            },
            Foreign,
        ),
        (
            "released, being deleted",
            Claim {
                made: Some(("m", "uid-old")),
                released: Some(("m", "uid-c")),
                deleting: true,
                ..c()
            },
            Foreign,
        ),
        (
            "made for an earlier Machine of this name, never released (its cleanup did not run)",
            Claim {
                made: Some(("m", "uid-old")),
                ..c()
            },
            Foreign,
        ),
        (
            "our proofs copied onto a claim planted after ours was deleted",
            Claim {
                made: Some(("m", "uid-old")),
                released: Some(("m", "uid-ours-deleted")),
                labels_for: Some("m"),
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
            "proofs made with another key",
            Claim {
                forged_proofs: true,
                owner: Some(("uid-m", true)),
                ..c()
            },
            Foreign,
        ),
        (
            "conflicting: made by us for another Machine (a + b-root vs a-b + root)",
            Claim {
                made: Some(("m-x", "uid-x")),
                owner: Some(("uid-x", true)),
                ..c()
            },
            Foreign,
        ),
        (
            "conflicting: released by us for another Machine name",
            Claim {
                made: Some(("m-x", "uid-x")),
                released: Some(("m-x", "uid-c")),
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
        made: Some(("m", "uid-m")),
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
