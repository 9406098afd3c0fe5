use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::api::names::MANAGED_BY;
use crate::reconciler::decide::evidence::Target;

mod listed;

const PVC: &str = "PersistentVolumeClaim";
const NS: &str = "team-a";
const KEY_MADE: &str = "2026-06-01T00:00:00Z";
const AFTER: &str = "2026-07-01T00:00:00Z";
const BEFORE: &str = "2026-05-01T00:00:00Z";

fn key() -> OwnershipKey {
    let made: Timestamp = KEY_MADE.parse().unwrap();
    OwnershipKey::new(&[42; 32], Some(made)).unwrap()
}

fn other_key() -> OwnershipKey {
    OwnershipKey::new(&[7; 32], None).unwrap()
}

/// What claim `m-root` (uid `uid-c`) carries.
#[derive(Clone, Copy, Default)]
struct Obj {
    /// Our labels for this Machine name.
    labels: Option<&'static str>,
    /// A made-for proof for (Machine name, Machine uid), by our key or (forged) another.
    made: Option<(&'static str, &'static str)>,
    forged: bool,
    /// A release proof for this very claim, for this Machine name.
    released: Option<&'static str>,
    controller: Option<&'static str>,
    created: Option<&'static str>,
    deleting: bool,
}

fn meta(o: Obj) -> ObjectMeta {
    let target = Target {
        kind: PVC,
        namespace: NS,
        name: "m-root",
    };
    let signer = if o.forged { other_key() } else { key() };
    let mut annotations = BTreeMap::new();
    if let Some((machine, uid)) = o.made {
        annotations.insert(
            PROOF_ANNOTATION.to_owned(),
            signer.proof(&target, machine, uid),
        );
    }
    if let Some(machine) = o.released {
        annotations.insert(
            RELEASE_ANNOTATION.to_owned(),
            signer.release_proof(&target, "uid-c", machine),
        );
    }
    let labels = o.labels.map(|m| {
        BTreeMap::from([
            (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
            (MACHINE_LABEL.to_owned(), m.to_owned()),
        ])
    });
    ObjectMeta {
        name: Some("m-root".to_owned()),
        namespace: Some(NS.to_owned()),
        uid: Some("uid-c".to_owned()),
        labels,
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: o.controller.map(|uid| {
            vec![OwnerReference {
                uid: uid.to_owned(),
                controller: Some(true),
                kind: "Machine".to_owned(),
                name: "m".to_owned(),
                api_version: "vitistack.io/v1alpha1".to_owned(),
                ..OwnerReference::default()
            }]
        }),
        creation_timestamp: Some(Time(o.created.unwrap_or(AFTER).parse().unwrap())),
        deletion_timestamp: o
            .deleting
            .then(|| Time(AFTER.parse::<Timestamp>().unwrap())),
        ..ObjectMeta::default()
    }
}

fn live(machines: &[(&str, &str)]) -> LiveMachines {
    machines
        .iter()
        .map(|(name, uid)| ((NS.to_owned(), (*name).to_owned()), (*uid).to_owned()))
        .collect()
}

fn orphan(why: Why) -> Verdict {
    Verdict::Orphan {
        machine: "m".to_owned(),
        why,
    }
}

#[test]
fn verdicts() {
    let ours = Obj {
        labels: Some("m"),
        made: Some(("m", "uid-m")),
        ..Obj::default()
    };
    let released = Obj {
        labels: Some("m"),
        released: Some("m"),
        ..Obj::default()
    };
    let legacy = Obj {
        labels: Some("m"),
        created: Some(BEFORE),
        ..Obj::default()
    };
    let cases: Vec<(&str, Obj, LiveMachines, Verdict)> = vec![
        (
            "nothing of ours",
            Obj::default(),
            live(&[]),
            Verdict::NotOurs,
        ),
        (
            "made for the live Machine",
            ours,
            live(&[("m", "uid-m")]),
            Verdict::Live,
        ),
        (
            "its Machine gone",
            ours,
            live(&[]),
            orphan(Why::MachineGone),
        ),
        (
            "another Machine of the name now",
            ours,
            live(&[("m", "uid-new")]),
            orphan(Why::MachineReplaced),
        ),
        (
            "a Machine of that name elsewhere does not count",
            ours,
            [(("team-b".to_owned(), "m".to_owned()), "uid-m".to_owned())].into(),
            orphan(Why::MachineGone),
        ),
        (
            "being deleted",
            Obj {
                deleting: true,
                ..ours
            },
            live(&[]),
            Verdict::NotOurs,
        ),
        (
            "released, nobody to adopt it",
            released,
            live(&[]),
            orphan(Why::Released),
        ),
        (
            "released, a Machine of the name may adopt it",
            released,
            live(&[("m", "uid-new")]),
            Verdict::Live,
        ),
        (
            "a proof under another key",
            Obj {
                forged: true,
                ..ours
            },
            live(&[]),
            Verdict::Unproven,
        ),
        (
            "a proof for another Machine name under the label",
            Obj {
                made: Some(("other", "uid-m")),
                ..ours
            },
            live(&[]),
            Verdict::Unproven,
        ),
        (
            "our labels alone, made after the key",
            Obj {
                labels: Some("m"),
                ..Obj::default()
            },
            live(&[]),
            Verdict::Unproven,
        ),
        (
            "a proof but no Machine label",
            Obj {
                labels: None,
                ..ours
            },
            live(&[]),
            Verdict::Unproven,
        ),
        (
            "older than the key, Machine gone",
            legacy,
            live(&[]),
            orphan(Why::MadeBeforeKey),
        ),
        (
            "older than the key, Machine lives",
            legacy,
            live(&[("m", "uid-m")]),
            Verdict::Live,
        ),
        (
            "older than the key, controlled by a gone Machine of the name",
            Obj {
                controller: Some("uid-old"),
                ..legacy
            },
            live(&[("m", "uid-m")]),
            orphan(Why::MachineReplaced),
        ),
    ];
    for (what, obj, machines, want) in cases {
        assert_eq!(judge(PVC, &meta(obj), &machines, &key()), want, "{what}");
    }
}

#[test]
fn on_a_remote_cluster_nothing_predates_the_key() {
    let legacy = Obj {
        labels: Some("m"),
        created: Some(BEFORE),
        ..Obj::default()
    };
    let remote = key().without_history();
    assert_eq!(
        judge(PVC, &meta(legacy), &live(&[]), &remote),
        Verdict::Unproven
    );
}

#[test]
fn advice_names_the_command_and_what_adoption_takes() {
    let a = advice(PVC, NS, "m-root", "m", &Why::Released);
    assert!(
        a.starts_with("delete: kubectl delete pvc m-root -n team-a; adopt:"),
        "{a}"
    );
    let a = advice("VirtualMachine", NS, "m", "m", &Why::MachineGone);
    assert!(
        a.contains("kubectl delete vm m -n team-a") && a.contains("never adopted"),
        "{a}"
    );
    let a = advice("DataVolume", NS, "m-root", "m", &Why::MachineGone);
    assert!(
        a.contains("kubectl delete dv m-root") && a.contains("pvc: {name: m-root}"),
        "{a}"
    );
}
