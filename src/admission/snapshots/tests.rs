use serde_json::{Value, json};

use super::*;
use crate::admission::review::GroupVersionKind;
use crate::machine::Catalog;

fn request(kind: &str, op: &str, object: Value, old: Option<Value>) -> Request {
    Request {
        uid: "u".into(),
        kind: GroupVersionKind {
            group: "vitistack.io".into(),
            version: "v1alpha1".into(),
            kind: kind.into(),
        },
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .into(),
        namespace: Some("ns".into()),
        operation: op.into(),
        object: Some(object),
        old_object: old,
        ..Default::default()
    }
}

fn object(kind: &str, spec: Value) -> Value {
    json!({"apiVersion": "vitistack.io/v1alpha1", "kind": kind,
           "metadata": {"name": "x", "namespace": "ns"}, "spec": spec})
}

fn message(v: &Verdict) -> String {
    v.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

#[test]
fn snapshots_and_restores_name_what_they_are_about_and_never_change_it() {
    let a = Admission::new(Catalog::default()).expect("admission");
    let snap = |spec| object(SNAPSHOT_KIND, spec);
    let rest = |spec| object(RESTORE_KIND, spec);
    type Check = fn(&Admission, &Request) -> Verdict;
    let (s, r): (Check, Check) = (Admission::validate_snapshot, Admission::validate_restore);
    let cases: Vec<(&str, Check, Request, Result<(), &str>)> = vec![
        (
            "a snapshot",
            s,
            request(
                SNAPSHOT_KIND,
                "CREATE",
                snap(json!({"machineName": "web"})),
                None,
            ),
            Ok(()),
        ),
        (
            "no Machine named",
            s,
            request(SNAPSHOT_KIND, "CREATE", snap(json!({})), None),
            Err("spec.machineName: Required value"),
        ),
        (
            "a Machine name that cannot be one",
            s,
            request(
                SNAPSHOT_KIND,
                "CREATE",
                snap(json!({"machineName": "Web_1"})),
                None,
            ),
            Err("spec.machineName: Invalid value: \"Web_1\""),
        ),
        (
            "a wrong type",
            s,
            request(
                SNAPSHOT_KIND,
                "CREATE",
                snap(json!({"machineName": 7})),
                None,
            ),
            Err("spec.machineName"),
        ),
        (
            "pointed at another Machine",
            s,
            request(
                SNAPSHOT_KIND,
                "UPDATE",
                snap(json!({"machineName": "db"})),
                Some(snap(json!({"machineName": "web"}))),
            ),
            Err("spec: Forbidden: is immutable"),
        ),
        (
            "a label added",
            s,
            request(
                SNAPSHOT_KIND,
                "UPDATE",
                snap(json!({"machineName": "web"})),
                Some(snap(json!({"machineName": "web"}))),
            ),
            Ok(()),
        ),
        (
            "a restore",
            r,
            request(
                RESTORE_KIND,
                "CREATE",
                rest(json!({"machineName": "web", "snapshotName": "web-before"})),
                None,
            ),
            Ok(()),
        ),
        (
            "a restore from nothing",
            r,
            request(
                RESTORE_KIND,
                "CREATE",
                rest(json!({"machineName": "web"})),
                None,
            ),
            Err("spec.snapshotName: Required value"),
        ),
        (
            "the wrong kind on the snapshot webhook",
            s,
            request(
                RESTORE_KIND,
                "CREATE",
                rest(json!({"machineName": "web"})),
                None,
            ),
            Err("Kind=MachineRestore is not handled"),
        ),
    ];
    for (case, check, req, want) in cases {
        let v = check(&a, &req);
        match want {
            Ok(()) => assert!(v.allowed, "{case}: {}", message(&v)),
            Err(text) => {
                assert!(!v.allowed, "{case}");
                assert!(message(&v).contains(text), "{case}: {}", message(&v));
            }
        }
    }
}
