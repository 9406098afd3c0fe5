//! Credential copies over fabricated Machines, sources and remote objects.

use k8s_openapi::ByteString;
use serde_json::json;

use super::*;
use crate::api::names::PROOF_ANNOTATION;
use crate::reconciler::decide::evidence::{OwnershipKey, Target};
use crate::reconciler::decide::ownership;

/// The object found under a copy's name judged for `ONE`, as observe judges it.
fn judged(live: Option<&Secret>) -> Ownership {
    ownership::of(live, ONE, &key())
}

fn key() -> OwnershipKey {
    OwnershipKey::new(&[7; 32], None).expect("key")
}

const ONE: MachineRef<'static> = MachineRef {
    name: "one",
    uid: Some("uid-one"),
};

fn disks(v: serde_json::Value) -> Vec<Disk> {
    serde_json::from_value(v).expect("disks")
}

/// The disks of `one`: an http import with credentials and a CA, a registry import with
/// credentials, a plain http import and a blank disk; a CD-ROM with a CA only.
fn machine_disks() -> (Vec<Disk>, Vec<Cdrom>) {
    let d = disks(json!([
        {"name": "root", "source": {"http": {"url": "https://x/a.qcow2",
            "secretRef": {"name": "creds"}, "certConfigMap": "ca"}}},
        {"name": "reg", "source": {"registry": {"url": "docker://x/y", "secretRef": {"name": "pull"}}}},
        {"name": "plain", "source": {"http": {"url": "https://x/b.qcow2"}}},
        {"name": "data", "size": "1Gi"}
    ]));
    let c: Vec<Cdrom> = serde_json::from_value(json!([
        {"name": "iso", "source": {"http": {"url": "https://x/c.iso", "certConfigMap": "ca"}}}
    ]))
    .expect("cdroms");
    (d, c)
}

#[test]
fn each_credential_a_source_names_is_copied_under_a_name_of_the_data_volume() {
    let (d, c) = machine_disks();
    let got: Vec<(Credential, String, String, String)> = wanted_copies("one", &d, &c)
        .into_iter()
        .map(|w| (w.what, w.data_volume, w.source, w.copy))
        .collect();
    let w = |what, dv: &str, source: &str, copy: &str| {
        (what, dv.to_owned(), source.to_owned(), copy.to_owned())
    };
    assert_eq!(
        got,
        [
            w(
                Credential::Secret,
                "one-root",
                "creds",
                "one-root-credentials"
            ),
            w(Credential::ConfigMap, "one-root", "ca", "one-root-ca"),
            w(Credential::Secret, "one-reg", "pull", "one-reg-credentials"),
            w(Credential::ConfigMap, "one-iso", "ca", "one-iso-ca"),
        ]
    );
}

fn dv(name: &str, source: serde_json::Value) -> DataVolume {
    serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "metadata": {"name": name}, "spec": {"source": source}
    }))
    .expect("dv")
}

#[test]
fn a_new_data_volume_names_the_copies_and_one_made_keeps_its_source() {
    let (d, c) = machine_disks();
    let w = wanted_copies("one", &d, &c);
    let http =
        json!({"http": {"url": "https://x/a.qcow2", "secretRef": "creds", "certConfigMap": "ca"}});
    let mut dvs = vec![
        dv("one-root", http.clone()),
        dv(
            "one-reg",
            json!({"registry": {"url": "docker://x/y", "secretRef": "pull"}}),
        ),
        dv("one-plain", json!({"http": {"url": "https://x/b.qcow2"}})),
        dv(
            "one-iso",
            json!({"http": {"url": "https://x/c.iso", "certConfigMap": "ca"}}),
        ),
    ];
    let mut made = vec![dv("one-root", http)];
    point_at_copies(&mut dvs, &w, |_| false);
    point_at_copies(&mut made, &w, |n| n == "one-root");
    let source = |dv: &DataVolume| serde_json::to_value(&dv.spec.source).expect("json");
    assert_eq!(
        source(&dvs[0]),
        json!({"http": {"url": "https://x/a.qcow2", "secretRef": "one-root-credentials", "certConfigMap": "one-root-ca"}})
    );
    assert_eq!(
        source(&dvs[1]),
        json!({"registry": {"url": "docker://x/y", "secretRef": "one-reg-credentials"}})
    );
    assert_eq!(
        source(&dvs[2]),
        json!({"http": {"url": "https://x/b.qcow2"}})
    );
    assert_eq!(
        source(&dvs[3]),
        json!({"http": {"url": "https://x/c.iso", "certConfigMap": "one-iso-ca"}})
    );
    // Made before: its source stays (CDI refuses a change), and it names no copy.
    assert_eq!(
        source(&made[0]),
        json!({"http": {"url": "https://x/a.qcow2", "secretRef": "creds", "certConfigMap": "ca"}})
    );
    let names = |dv: &DataVolume| w.iter().filter(|x| names_copy(dv, x)).count();
    assert_eq!((names(&dvs[0]), names(&dvs[1]), names(&dvs[3])), (2, 1, 1));
    assert_eq!(names(&made[0]), 0);
}

fn source_secret(value: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("creds".into()),
            namespace: Some("team-a".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "accessKeyId".into(),
            ByteString(value.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// A Secret named like the copy on the remote, proven under `with` for `machine` (if any).
fn live(proof: Option<(&OwnershipKey, MachineRef)>, labelled: bool) -> Secret {
    let target = Target {
        kind: "Secret",
        namespace: "team-a",
        name: "one-root-credentials",
    };
    let annotations = proof.map(|(k, m)| {
        let value = k.proof(&target, m.name, m.uid.unwrap_or_default());
        BTreeMap::from([(PROOF_ANNOTATION.to_owned(), value)])
    });
    let labels = labelled.then(|| {
        BTreeMap::from([
            (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
            (MACHINE_LABEL.to_owned(), "one".to_owned()),
        ])
    });
    Secret {
        metadata: ObjectMeta {
            name: Some("one-root-credentials".into()),
            namespace: Some("team-a".into()),
            uid: Some("uid-copy".into()),
            annotations,
            labels,
            ..ObjectMeta::default()
        },
        ..Secret::default()
    }
}

fn step_name<K>(s: &Step<K>) -> &'static str {
    match s {
        Step::Write(_) => "write",
        Step::Conflict => "conflict",
        Step::SourceMissing => "source missing",
    }
}

#[test]
fn a_copy_is_written_only_over_nothing_or_our_own_for_this_machine() {
    let (d, c) = machine_disks();
    let w = &wanted_copies("one", &d, &c)[0];
    let other_key = OwnershipKey::new(&[8; 32], None).expect("key");
    let two = MachineRef {
        name: "one",
        uid: Some("uid-earlier-one"),
    };
    let src = source_secret("AKIA");
    // (what, the source, what is there, want)
    let cases: [(&str, Option<&Secret>, Option<Secret>, &str); 8] = [
        ("nothing there", Some(&src), None, "write"),
        (
            "our copy",
            Some(&src),
            Some(live(Some((&key(), ONE)), true)),
            "write",
        ),
        (
            "ours, labels stripped",
            Some(&src),
            Some(live(Some((&key(), ONE)), false)),
            "write",
        ),
        (
            "someone else's",
            Some(&src),
            Some(live(None, false)),
            "conflict",
        ),
        (
            "our labels without the proof",
            Some(&src),
            Some(live(None, true)),
            "conflict",
        ),
        (
            "another key's proof",
            Some(&src),
            Some(live(Some((&other_key, ONE)), true)),
            "conflict",
        ),
        // Made for an earlier Machine of the same name: not this one's.
        (
            "an earlier Machine's",
            Some(&src),
            Some(live(Some((&key(), two)), true)),
            "conflict",
        ),
        ("the source gone", None, None, "source missing"),
    ];
    for (what, source, there, want) in cases {
        let s = copy_step::<Secret>(w, (ONE, "team-a"), source, judged(there.as_ref()));
        assert_eq!(step_name(&s), want, "{what}");
    }
    // The copy: the source's data and type under the copy's name, labelled for the Machine.
    let Step::Write(copy) = copy_step::<Secret>(w, (ONE, "team-a"), Some(&src), Ownership::Absent)
    else {
        panic!("no copy");
    };
    assert_eq!(copy.metadata.name.as_deref(), Some("one-root-credentials"));
    assert_eq!(copy.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(copy.data, src.data);
    assert!(ownership::labelled_for(&copy.metadata, "one"));
    assert!(copy.metadata.owner_references.is_none());
}

#[test]
fn a_ca_copy_carries_the_config_maps_data() {
    let (d, c) = machine_disks();
    let w = &wanted_copies("one", &d, &c)[1];
    let source = ConfigMap {
        data: Some(BTreeMap::from([("ca.pem".into(), "PEM".into())])),
        ..ConfigMap::default()
    };
    let Step::Write(copy) =
        copy_step::<ConfigMap>(w, (ONE, "team-a"), Some(&source), Ownership::Absent)
    else {
        panic!("no copy");
    };
    assert_eq!(copy.metadata.name.as_deref(), Some("one-root-ca"));
    assert_eq!(copy.data, source.data);
}
