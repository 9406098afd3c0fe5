//! Re-proving over fabricated objects and times.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::api::names::MACHINE_LABEL;

const REPLACED: &str = "2026-06-01T00:00:00Z";

fn lost() -> OwnershipKey {
    OwnershipKey::new(&[1; 32], None).expect("key")
}

fn new_key() -> OwnershipKey {
    let at: Timestamp = REPLACED.parse().expect("time");
    OwnershipKey::new(&[2; 32], Some(at))
        .expect("key")
        .without_history()
        .replacing(at)
}

/// An object of `kind` named `name`, labelled for `labelled` (if any), proven under `key` for
/// Machine `far` with uid `proof_uid`, created at `created`.
fn object(
    kind: &str,
    name: &str,
    labelled: Option<&str>,
    proof: Option<(&OwnershipKey, &str)>,
    created: &str,
) -> ObjectMeta {
    let mut meta = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("team-a".into()),
        creation_timestamp: Some(Time(created.parse().expect("time"))),
        ..ObjectMeta::default()
    };
    if let Some(machine) = labelled {
        meta.labels = Some(BTreeMap::from([
            (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
            (MACHINE_LABEL.to_owned(), machine.to_owned()),
        ]));
    }
    if let Some((key, uid)) = proof {
        let target = Target::of(kind, &meta).expect("target");
        let p = key.proof(&target, "far", uid);
        meta.annotations = Some(BTreeMap::from([(PROOF_ANNOTATION.to_owned(), p)]));
    }
    meta
}

#[test]
fn objects_made_under_the_lost_key_are_re_proven_by_labels_names_and_their_machine_uid() {
    let key = new_key();
    let far = MachineRef {
        name: "far",
        uid: Some("uid-far"),
    };
    let before = "2026-05-01T00:00:00Z";
    let after = "2026-06-02T00:00:00Z";
    let old = |kind, name| object(kind, name, Some("far"), Some((&lost(), "uid-far")), before);
    // (what, kind, object, re-proven?)
    let cases: Vec<(&str, &str, ObjectMeta, bool)> = vec![
        (
            "its VM",
            "VirtualMachine",
            old("VirtualMachine", "far"),
            true,
        ),
        (
            "its disk",
            "PersistentVolumeClaim",
            old("PersistentVolumeClaim", "far-root"),
            true,
        ),
        (
            "its DataVolume",
            "DataVolume",
            old("DataVolume", "far-data"),
            true,
        ),
        (
            "its cloud-init Secret",
            "Secret",
            old("Secret", "far-cloudinit"),
            true,
        ),
        (
            "made after the new key",
            "VirtualMachine",
            object(
                "VirtualMachine",
                "far",
                Some("far"),
                Some((&lost(), "uid-far")),
                after,
            ),
            false,
        ),
        (
            "already proven under the new key",
            "VirtualMachine",
            object(
                "VirtualMachine",
                "far",
                Some("far"),
                Some((&key, "uid-far")),
                before,
            ),
            false,
        ),
        (
            "not labelled",
            "VirtualMachine",
            object(
                "VirtualMachine",
                "far",
                None,
                Some((&lost(), "uid-far")),
                before,
            ),
            false,
        ),
        (
            "labelled for another Machine",
            "VirtualMachine",
            object(
                "VirtualMachine",
                "far",
                Some("near"),
                Some((&lost(), "uid-far")),
                before,
            ),
            false,
        ),
        (
            "its old proof names an earlier Machine of the name",
            "VirtualMachine",
            object(
                "VirtualMachine",
                "far",
                Some("far"),
                Some((&lost(), "uid-old")),
                before,
            ),
            false,
        ),
        (
            "no proof at all (never made by us there)",
            "VirtualMachine",
            object("VirtualMachine", "far", Some("far"), None, before),
            false,
        ),
        (
            "a VM of another name",
            "VirtualMachine",
            old("VirtualMachine", "far-2"),
            false,
        ),
        (
            "a claim not named for it",
            "PersistentVolumeClaim",
            old("PersistentVolumeClaim", "farm"),
            false,
        ),
        (
            "a claim named just like it",
            "PersistentVolumeClaim",
            old("PersistentVolumeClaim", "far-"),
            false,
        ),
        ("another Secret", "Secret", old("Secret", "far-keys"), false),
    ];
    for (what, kind, meta, want) in cases {
        let got = reproof(kind, &meta, far, &key);
        assert_eq!(got.is_some(), want, "{what}");
        if let Some(proof) = got {
            let mut proven = meta.clone();
            proven
                .annotations
                .get_or_insert_default()
                .insert(PROOF_ANNOTATION.to_owned(), proof);
            assert_eq!(
                key.made_for(kind, &proven, "far"),
                Some("uid-far"),
                "{what}"
            );
        }
    }
    // A key that replaced nothing re-proves nothing; a Machine never stored owns nothing.
    let plain = OwnershipKey::new(&[2; 32], None).expect("key");
    assert!(reproof("VirtualMachine", &old("VirtualMachine", "far"), far, &plain).is_none());
    let unstored = MachineRef {
        name: "far",
        uid: None,
    };
    assert!(
        reproof(
            "VirtualMachine",
            &old("VirtualMachine", "far"),
            unstored,
            &key
        )
        .is_none()
    );
}

#[test]
fn an_attachment_is_re_proven_for_its_network_configuration_of_today() {
    let key = new_key();
    let before = "2026-05-01T00:00:00Z";
    let nad = |proof_uid: &str, labelled: bool, created: &str| {
        let mut meta = ObjectMeta {
            name: Some("prod".into()),
            namespace: Some("team-a".into()),
            creation_timestamp: Some(Time(created.parse().expect("time"))),
            ..ObjectMeta::default()
        };
        if labelled {
            meta.labels = Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_owned(),
                MANAGED_BY.to_owned(),
            )]));
        }
        let target = Target::of(ATTACHMENT_KIND, &meta).expect("target");
        let p = lost().proof(&target, "prod", proof_uid);
        meta.annotations = Some(BTreeMap::from([(PROOF_ANNOTATION.to_owned(), p)]));
        meta
    };
    let proof = attachment_reproof(&nad("uid-nc", true, before), Some("uid-nc"), &key);
    let mut proven = nad("uid-nc", true, before);
    proven
        .annotations
        .get_or_insert_default()
        .insert(PROOF_ANNOTATION.to_owned(), proof.expect("re-proven"));
    assert_eq!(
        key.made_for(ATTACHMENT_KIND, &proven, "prod"),
        Some("uid-nc")
    );
    for (what, meta, nc) in [
        (
            "its NetworkConfiguration gone",
            nad("uid-nc", true, before),
            None,
        ),
        (
            "another uid's",
            nad("uid-old", true, before),
            Some("uid-nc"),
        ),
        ("not labelled", nad("uid-nc", false, before), Some("uid-nc")),
        (
            "newer than the key",
            nad("uid-nc", true, "2026-07-01T00:00:00Z"),
            Some("uid-nc"),
        ),
    ] {
        assert!(attachment_reproof(&meta, nc, &key).is_none(), "{what}");
    }
}
