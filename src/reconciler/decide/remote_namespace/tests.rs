//! Namespace evidence over fabricated namespaces.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;

fn key() -> OwnershipKey {
    OwnershipKey::new(&[7; 32], None).expect("key")
}

fn other_key() -> OwnershipKey {
    OwnershipKey::new(&[8; 32], None).expect("key")
}

fn wanted<'a>(name: &'a str, management: &'a str, identity: &'a str) -> Wanted<'a> {
    Wanted {
        name,
        management,
        cluster: "dc1",
        identity,
    }
}

const WANT: Wanted<'static> = Wanted {
    name: "team-a",
    management: "team-a",
    cluster: "dc1",
    identity: "uid-ks",
};

/// Namespace `team-a` with our label or not, and the proof `proof` (if any).
fn namespace(labelled: bool, proof: Option<String>, deleting: bool) -> ObjectMeta {
    let labels = labelled.then(|| BTreeMap::from([(MANAGED_BY_LABEL.into(), MANAGED_BY.into())]));
    ObjectMeta {
        name: Some("team-a".into()),
        labels,
        annotations: proof.map(|p| BTreeMap::from([(PROOF_ANNOTATION.into(), p)])),
        deletion_timestamp: deleting.then(|| Time("2026-01-01T00:00:00Z".parse().expect("t"))),
        ..ObjectMeta::default()
    }
}

fn reason(v: &Verdict) -> &str {
    match v {
        Verdict::Make(_) => "make",
        Verdict::Use => "use",
        Verdict::Adopt(_) => "adopt",
        Verdict::Unready(r, _) => r,
    }
}

#[test]
fn namespace_evidence() {
    let ours = Some(proof(&WANT, &key()));
    // Proofs for another management namespace, another cluster, another name, another key.
    let for_b = Some(proof(&wanted("team-a", "team-b", "uid-ks"), &key()));
    let elsewhere = Some(proof(&wanted("team-a", "team-a", "uid-other"), &key()));
    let renamed = Some(proof(&wanted("team-b", "team-a", "uid-ks"), &key()));
    let theirs = Some(proof(&WANT, &other_key()));
    // (what, the namespace found, it holds an object proven for one of its Machines, verdict)
    let cases: [(&str, Option<ObjectMeta>, bool, &str); 13] = [
        ("missing", None, false, "make"),
        (
            "ours",
            Some(namespace(true, ours.clone(), false)),
            false,
            "use",
        ),
        (
            "ours, labels removed",
            Some(namespace(false, ours.clone(), false)),
            false,
            "use",
        ),
        (
            "ours, being deleted",
            Some(namespace(true, ours, true)),
            true,
            NAMESPACE_TERMINATING,
        ),
        (
            "foreign, being deleted",
            Some(namespace(false, None, true)),
            false,
            NAMESPACE_TERMINATING,
        ),
        (
            "foreign",
            Some(namespace(false, None, false)),
            false,
            NAMESPACE_CONFLICT,
        ),
        // Labels are written by whoever may write the namespace: not evidence alone.
        (
            "foreign with our labels",
            Some(namespace(true, None, false)),
            false,
            NAMESPACE_CONFLICT,
        ),
        // Made before proofs: labelled, and holding what only we can have written.
        (
            "ours by the earlier rule",
            Some(namespace(true, None, false)),
            true,
            "adopt",
        ),
        (
            "unlabelled, holding ours",
            Some(namespace(false, None, false)),
            true,
            NAMESPACE_CONFLICT,
        ),
        (
            "proof for team-b",
            Some(namespace(true, for_b, false)),
            false,
            NAMESPACE_CONFLICT,
        ),
        (
            "proof from another cluster",
            Some(namespace(true, elsewhere, false)),
            false,
            NAMESPACE_CONFLICT,
        ),
        (
            "proof for another name",
            Some(namespace(true, renamed, false)),
            false,
            NAMESPACE_CONFLICT,
        ),
        (
            "another key's proof",
            Some(namespace(true, theirs, false)),
            false,
            NAMESPACE_CONFLICT,
        ),
    ];
    for (what, found, holds, want) in cases {
        let v = judge(&WANT, found.as_ref(), holds, &key());
        assert_eq!(reason(&v), want, "{what}");
        // What is adopted gets the proof that makes it ours from then on.
        if let Verdict::Adopt(p) = &v {
            let mut meta = namespace(true, None, false);
            meta.annotations = Some(BTreeMap::from([(PROOF_ANNOTATION.into(), p.clone())]));
            assert!(proven(&WANT, &meta, &key()), "{what}");
        }
    }
}

#[test]
fn a_made_namespace_is_labelled_and_proven() {
    let Verdict::Make(ns) = judge(&WANT, None, false, &key()) else {
        panic!("not made");
    };
    assert_eq!(ns.metadata.name.as_deref(), Some("team-a"));
    let labels = ns.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(MANAGED_BY_LABEL).map(String::as_str),
        Some(MANAGED_BY)
    );
    assert!(proven(&WANT, &ns.metadata, &key()));
}

#[test]
fn a_conflict_names_the_namespace_the_cluster_and_the_way_out() {
    let found = namespace(false, None, false);
    let Verdict::Unready(_, message) = judge(&WANT, Some(&found), false, &key()) else {
        panic!("not a conflict");
    };
    assert!(message.contains("namespace team-a"), "{message}");
    assert!(message.contains("cluster dc1"), "{message}");
    assert!(message.contains("delete it there"), "{message}");
}

#[test]
fn only_objects_proven_for_the_machine_they_are_labelled_for_count() {
    let k = key();
    let vm = |label: Option<&str>, proof_for: &str, with: &OwnershipKey| {
        let target = Target {
            kind: "VirtualMachine",
            namespace: "team-a",
            name: "one",
        };
        ObjectMeta {
            name: Some("one".into()),
            namespace: Some("team-a".into()),
            labels: label.map(|l| BTreeMap::from([(MACHINE_LABEL.into(), l.into())])),
            annotations: Some(BTreeMap::from([(
                PROOF_ANNOTATION.into(),
                with.proof(&target, proof_for, "uid-m"),
            )])),
            ..ObjectMeta::default()
        }
    };
    let cases = [
        ("proven for its Machine", vm(Some("one"), "one", &k), true),
        (
            "labelled for another Machine",
            vm(Some("two"), "one", &k),
            false,
        ),
        ("no Machine label", vm(None, "one", &k), false),
        (
            "another key's proof",
            vm(Some("one"), "one", &other_key()),
            false,
        ),
    ];
    for (what, meta, want) in cases {
        assert_eq!(holds_ours([("VirtualMachine", &meta)], &k), want, "{what}");
        // Judged by its kind too.
        assert!(
            !holds_ours([("PersistentVolumeClaim", &meta)], &k),
            "{what}"
        );
    }
    assert!(!holds_ours([], &k), "empty");
}

#[test]
fn under_a_replaced_key_a_labelled_namespace_older_than_it_is_adopted() {
    let at: k8s_openapi::jiff::Timestamp = "2026-06-01T00:00:00Z".parse().expect("time");
    let new_key = OwnershipKey::new(&[2; 32], Some(at))
        .expect("key")
        .without_history()
        .replacing(at);
    let created = |labelled: bool, when: &str| ObjectMeta {
        creation_timestamp: Some(Time(when.parse().expect("time"))),
        ..namespace(labelled, None, false)
    };
    // The lost key's proof no longer verifies: labels and age decide, once.
    let lost = Some(proof(
        &WANT,
        &OwnershipKey::new(&[1; 32], None).expect("key"),
    ));
    let cases = [
        (
            "labelled, older",
            created(true, "2026-05-01T00:00:00Z"),
            "adopt",
        ),
        (
            "labelled, older, lost key's proof",
            ObjectMeta {
                annotations: Some(BTreeMap::from([(
                    PROOF_ANNOTATION.into(),
                    lost.clone().unwrap_or_default(),
                )])),
                ..created(true, "2026-05-01T00:00:00Z")
            },
            "adopt",
        ),
        (
            "unlabelled, older",
            created(false, "2026-05-01T00:00:00Z"),
            NAMESPACE_CONFLICT,
        ),
        (
            "labelled, newer",
            created(true, "2026-07-01T00:00:00Z"),
            NAMESPACE_CONFLICT,
        ),
    ];
    for (what, meta, want) in cases {
        let v = judge(&WANT, Some(&meta), false, &new_key);
        assert_eq!(reason(&v), want, "{what}");
    }
    // Without a replacement, age says nothing.
    let old = created(true, "2026-05-01T00:00:00Z");
    assert_eq!(
        reason(&judge(&WANT, Some(&old), false, &key())),
        NAMESPACE_CONFLICT
    );
}
