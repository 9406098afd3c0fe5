//! Every branch of cleanup's decision as a row: what is deleted, released, kept or waited for.

use crate::reconciler::FINALIZER;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::api::names::{PROOF_ANNOTATION, RELEASE_ANNOTATION, RETAIN_DISKS_ANNOTATION};
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::evidence::Target;
use crate::reconciler::decide::ownership::MachineRef;
use crate::reconciler::observe::cleanup::{Attachment, Verdicts, judge, retains_disks};
use crate::reconciler::{MANAGED_BY, MANAGED_BY_LABEL};

mod rules;

const UID: &str = "uid-m";

fn key() -> OwnershipKey {
    OwnershipKey::new(&[5; 32], None).expect("key")
}

fn machine(finalizers: &[&str], annotations: &[(&str, &str)]) -> Machine {
    let mut m = Machine::new(
        "m",
        serde_json::from_value(json!({"template": "small"})).expect("spec"),
    );
    m.metadata.namespace = Some("ns".into());
    m.metadata.uid = Some(UID.into());
    m.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    m.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    let annotations = annotations.iter().map(|(k, v)| ((*k).into(), (*v).into()));
    m.metadata.annotations = Some(annotations.collect());
    m
}

/// Evidence an object of `kind` named `name` may carry.
#[derive(Clone, Copy)]
enum Proof {
    /// None: labels and a controller reference to the Machine only (a forgery, or a conflict).
    None,
    /// Made for this Machine.
    Made,
    /// Released by us for a Machine of this name (made for one that is gone).
    Released,
    /// Released for this name, and adopted since by this Machine (the proof of the write).
    Adopted,
    /// Released for this name, its adoption failed: still the gone Machine's made-for proof.
    AdoptionFailed,
}

/// `name`, of `kind`, with `proof`, and an owner reference to the Machine when `references`.
fn meta(kind: Kind, name: &str, proof: Proof, references: bool) -> ObjectMeta {
    let k = key();
    let uid = format!("uid-{name}");
    let target = Target {
        kind: kind.as_str(),
        namespace: "ns",
        name,
    };
    let made = |machine_uid| k.proof(&target, "m", machine_uid);
    let released = || k.release_proof(&target, &uid, "m");
    let annotations: BTreeMap<String, String> = match proof {
        Proof::None => BTreeMap::new(),
        Proof::Made | Proof::Adopted => [(PROOF_ANNOTATION.into(), made(UID))].into(),
        Proof::Released | Proof::AdoptionFailed => [
            (PROOF_ANNOTATION.into(), made("uid-gone")),
            (RELEASE_ANNOTATION.into(), released()),
        ]
        .into(),
    };
    let mut annotations = annotations;
    if matches!(proof, Proof::Adopted) {
        annotations.insert(RELEASE_ANNOTATION.into(), released());
    }
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(uid),
        resource_version: Some("7".into()),
        annotations: Some(annotations),
        labels: Some([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())].into()),
        owner_references: references.then(|| {
            vec![OwnerReference {
                kind: "Machine".into(),
                name: "m".into(),
                uid: UID.into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]
        }),
        ..ObjectMeta::default()
    }
}

fn remains(m: Machine) -> Remains {
    Remains {
        retain_disks: retains_disks(&m),
        machine: m,
        restoring: None,
        away: None,
        remote: false,
        vm: None,
        vmi: None,
        volumes: vec![],
        removed_data_volumes: vec![],
        derived_secret: None,
        attachments: vec![],
        credential_copies: vec![],
        verdicts: Verdicts::default(),
    }
}

/// The plan for `o` as the reconciler makes it: its objects judged with `key` as
/// `observe::cleanup` judges them when it reads them.
fn planned(o: &Remains, key: &OwnershipKey) -> Plan {
    let verdicts = judge(&o.read(), MachineRef::of(&o.machine), key);
    super::planned(&Remains {
        verdicts,
        ..o.clone()
    })
}

fn claim(proof: Proof, references: bool) -> Volume {
    let meta = meta(Kind::Claim, "m-data", proof, references);
    let (kind, disk) = (Kind::Claim, true);
    Volume { kind, disk, meta }
}

fn deleted(kind: Kind, name: &str, reason: Reason) -> Action {
    let (name, uid) = (name.to_owned(), format!("uid-{name}"));
    Action::Delete {
        kind,
        name,
        uid,
        reason,
    }
}

fn left(kind: Kind, name: &str, reason: Reason) -> Action {
    let name = name.to_owned();
    Action::Keep { kind, name, reason }
}

/// The release of `m-data` with the owner references left and whether a proof is added.
fn released(action: &Action) -> Option<(Reason, usize, bool)> {
    match action {
        Action::Release { release, reason } => Some((
            *reason,
            release.owners.len(),
            release.release_proof.is_some(),
        )),
        _ => None,
    }
}

/// How the Machine goes.
#[derive(Clone, Copy)]
enum Deletion {
    Plain,
    RetainDisks,
    Orphan,
    Remote,
    RemoteRetainDisks,
}

/// A deleting Machine with our finalizer, `how`, nothing read of it yet.
fn deleting(how: Deletion) -> Remains {
    let retain = [(RETAIN_DISKS_ANNOTATION, "true")];
    let (finalizers, annotations): (&[&str], &[(&str, &str)]) = match how {
        Deletion::Plain | Deletion::Remote => (&[FINALIZER], &[]),
        Deletion::RetainDisks | Deletion::RemoteRetainDisks => (&[FINALIZER], &retain),
        Deletion::Orphan => (&[FINALIZER, "orphan"], &[]),
    };
    let mut o = remains(machine(finalizers, annotations));
    o.remote = matches!(how, Deletion::Remote | Deletion::RemoteRetainDisks);
    o
}

#[test]
fn each_claim_is_deleted_released_or_left_as_its_evidence_says() {
    use Deletion::*;
    use Proof::*;
    let delete = || deleted(Kind::Claim, "m-data", Reason::Ours);
    let keep = |reason| left(Kind::Claim, "m-data", reason);
    // (row, how the Machine goes, its claim, expected)
    let rows = [
        ("ours", Plain, claim(Made, true), delete()),
        ("adopted", Plain, claim(Adopted, true), delete()),
        (
            "released",
            Plain,
            claim(Released, false),
            keep(Reason::NotOurs),
        ),
        ("conflict", Plain, claim(None, true), keep(Reason::NotOurs)),
        // The write that adopts carries the new proof: a failed one leaves the old.
        (
            "adoption failed",
            Plain,
            claim(AdoptionFailed, false),
            keep(Reason::NotOurs),
        ),
        ("remote, proven", Remote, claim(Made, false), delete()),
        (
            "released already",
            RetainDisks,
            claim(Adopted, false),
            keep(Reason::Released),
        ),
    ];
    for (row, how, claim, want) in rows {
        let mut o = deleting(how);
        o.volumes.push(claim);
        let plan = planned(&o, &key());
        assert_eq!(plan.actions, [want], "{row}");
        assert!(plan.remove_finalizer && plan.wait.is_none(), "{row}");
    }
}

#[test]
fn a_kept_disk_is_released_with_its_reason() {
    use Deletion::*;
    // (row, how the Machine goes, its claim references it, expected: reason, owners left, proof)
    let rows = [
        (
            "retain-disks",
            RetainDisks,
            true,
            (Reason::RetainDisks, 0, true),
        ),
        (
            "orphan deletion",
            Orphan,
            true,
            (Reason::OrphanDeletion, 0, true),
        ),
        (
            "unreferenced",
            Plain,
            false,
            (Reason::Unreferenced, 0, true),
        ),
        (
            "remote, retained",
            RemoteRetainDisks,
            false,
            (Reason::RetainDisks, 0, true),
        ),
    ];
    for (row, how, references, want) in rows {
        let mut o = deleting(how);
        o.volumes.push(claim(Proof::Made, references));
        let plan = planned(&o, &key());
        assert_eq!(plan.actions.len(), 1, "{row}");
        assert_eq!(released(&plan.actions[0]), Some(want), "{row}");
        assert!(plan.remove_finalizer, "{row}");
    }
}

#[test]
fn a_cdroms_data_volume_goes_even_under_retain_disks_and_a_going_one_is_left() {
    let mut o = remains(machine(&[FINALIZER], &[(RETAIN_DISKS_ANNOTATION, "true")]));
    let cdrom = meta(Kind::DataVolume, "m-iso", Proof::Made, true);
    let (kind, disk) = (Kind::DataVolume, false);
    o.volumes.push(Volume {
        kind,
        disk,
        meta: cdrom,
    });
    let mut going = claim(Proof::Made, true);
    going.meta.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    o.volumes.push(going);
    let removed = meta(Kind::DataVolume, "m-old", Proof::Made, true);
    let foreign = meta(Kind::DataVolume, "m-other", Proof::None, true);
    o.removed_data_volumes = vec![removed, foreign];
    assert_eq!(
        planned(&o, &key()).actions,
        [
            deleted(Kind::DataVolume, "m-iso", Reason::Ours),
            left(Kind::Claim, "m-data", Reason::Going),
            deleted(Kind::DataVolume, "m-old", Reason::RemovedCdrom),
            left(Kind::DataVolume, "m-other", Reason::NotOurs),
        ]
    );
}

#[test]
fn the_derived_secret_and_unused_attachments_go_only_if_ours() {
    let attachment = |name: &str, controller: &str, remote: bool| {
        let mut meta = meta(Kind::Attachment, name, Proof::None, false);
        meta.owner_references = Some(vec![OwnerReference {
            kind: "NetworkConfiguration".into(),
            name: name.into(),
            uid: controller.into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        if remote {
            let target = Target::of(Kind::Attachment.as_str(), &meta).expect("target");
            let proof = key().proof(&target, name, controller);
            meta.owner_references = None;
            (meta.annotations.get_or_insert_default()).insert(PROOF_ANNOTATION.into(), proof);
        }
        let network_configuration = Some("uid-nc".to_owned());
        Attachment {
            meta,
            network_configuration,
        }
    };
    for remote in [false, true] {
        let mut o = remains(machine(&[FINALIZER], &[]));
        o.remote = remote;
        o.derived_secret = Some(meta(Kind::Secret, "m-cloudinit", Proof::Made, true));
        o.attachments = vec![
            attachment("lan", "uid-nc", remote),
            attachment("wan", "uid-other", remote),
        ];
        // Remote: a proof under our key for an earlier NetworkConfiguration "wan" (deleted and
        // made again: another uid) is ours; locally a controller reference to another uid is not.
        let wan = if remote {
            deleted(Kind::Attachment, "wan", Reason::Unused)
        } else {
            left(Kind::Attachment, "wan", Reason::NotOurs)
        };
        assert_eq!(
            planned(&o, &key()).actions,
            [
                deleted(Kind::Secret, "m-cloudinit", Reason::Ours),
                deleted(Kind::Attachment, "lan", Reason::Unused),
                wan,
            ],
            "remote: {remote}"
        );
        o.derived_secret = Some(meta(Kind::Secret, "m-cloudinit", Proof::None, true));
        o.attachments.clear();
        assert_eq!(
            planned(&o, &key()).actions,
            [left(Kind::Secret, "m-cloudinit", Reason::NotOurs)],
            "a forged Secret, remote: {remote}"
        );
    }
}

#[test]
fn nothing_found_lets_the_machine_go_and_without_our_finalizer_nothing_is_done() {
    let plan = planned(&remains(machine(&[FINALIZER], &[])), &key());
    let only_the_finalizer = Plan {
        remove_finalizer: true,
        ..Plan::default()
    };
    assert_eq!(plan, only_the_finalizer);
    let mut o = remains(machine(&["other"], &[]));
    o.volumes.push(claim(Proof::Made, true));
    assert_eq!(planned(&o, &key()), Plan::default());
}

#[test]
fn a_remote_machines_credential_copies_go_last_and_only_when_proven() {
    use Proof::*;
    // (row, the Secret copy's proof, expected)
    let copy = "m-data-credentials";
    let rows = [
        ("proven", Made, deleted(Kind::Secret, copy, Reason::Ours)),
        (
            "someone else's",
            None,
            left(Kind::Secret, copy, Reason::NotOurs),
        ),
    ];
    for (row, proof, want) in rows {
        let mut o = deleting(Deletion::Remote);
        o.volumes.push(claim(Made, false));
        let copy_meta = meta(Kind::Secret, copy, proof, false);
        o.credential_copies.push((Kind::Secret, copy_meta));
        let plan = planned(&o, &key());
        let claim_deleted = deleted(Kind::Claim, "m-data", Reason::Ours);
        assert_eq!(plan.actions, [claim_deleted, want], "{row}");
        assert!(plan.remove_finalizer, "{row}");
    }
}
