use serde_json::{Value, json};

use super::*;
use crate::admission::review::GroupVersionKind;
use crate::api::MachineClass;
use crate::machine::Catalog;

fn request(op: &str, object: Value, old: Option<Value>) -> Request {
    Request {
        uid: "u".into(),
        kind: GroupVersionKind {
            group: "vitistack.io".into(),
            version: "v1alpha1".into(),
            kind: "MachineClass".into(),
        },
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .into(),
        operation: op.into(),
        object: Some(object),
        old_object: old,
        ..Default::default()
    }
}

fn class(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "MachineClass",
           "metadata": {"name": name}, "spec": spec})
}

fn admission(objects: &[Value]) -> Admission {
    let objects: Vec<MachineClass> = objects
        .iter()
        .map(|o| serde_json::from_value(o.clone()).expect("class"))
        .collect();
    let (catalog, _) = Catalog::default().with_class_objects(&objects);
    Admission::new(catalog).expect("admission")
}

fn message(v: &Verdict) -> String {
    v.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

#[test]
fn a_class_is_checked_on_its_own_and_against_the_default() {
    let sized = json!({"cpu": {"cores": 4}, "memory": {"size": "48Gi"}});
    let marked = json!({"cpu": {"cores": 4}, "memory": {"size": "48Gi"}, "default": true});
    let medium = class("medium", marked.clone());
    let a = admission(std::slice::from_ref(&medium));
    let cases: Vec<(&str, Request, Result<(), &str>)> = vec![
        (
            "valid",
            request("CREATE", class("xlarge", sized.clone()), None),
            Ok(()),
        ),
        (
            "invalid",
            request(
                "CREATE",
                class("xlarge", json!({"memory": {"size": "48Gi"}})),
                None,
            ),
            Err(
                r#"MachineClass.vitistack.io "xlarge" is invalid: spec.cpu.cores: Required value: every class sets its cores"#,
            ),
        ),
        (
            "a second default",
            request("CREATE", class("xlarge", marked.clone()), None),
            Err(
                r#"MachineClass.vitistack.io "xlarge" is invalid: spec.default: Forbidden: at most one MachineClass may be the default, and medium already is: set its spec.default to false first"#,
            ),
        ),
        (
            "the default itself, edited",
            request(
                "UPDATE",
                class(
                    "medium",
                    json!({"cpu": {"cores": 6}, "memory": {"size": "48Gi"}, "default": true}),
                ),
                Some(medium.clone()),
            ),
            Ok(()),
        ),
        (
            "a wrong type",
            request(
                "CREATE",
                class("xlarge", json!({"cpu": {"cores": "four"}})),
                None,
            ),
            Err(
                r#"MachineClass.vitistack.io "xlarge" is invalid: spec.cpu.cores: Invalid value: null: invalid type: string "four", expected i64"#,
            ),
        ),
        (
            "an unchanged spec is not checked again",
            {
                let old = class("old", json!({"memory": {"size": "1Gi"}}));
                let mut new = old.clone();
                new["metadata"]["labels"] = json!({"a": "b"});
                request("UPDATE", new, Some(old))
            },
            Ok(()),
        ),
        (
            "DELETE is not handled",
            request("DELETE", class("xlarge", sized.clone()), None),
            Err(
                r#"operation "DELETE" is not handled: this webhook admits MachineClass CREATE and UPDATE only"#,
            ),
        ),
        (
            "another kind",
            {
                let mut r = request("CREATE", class("xlarge", sized.clone()), None);
                r.kind.kind = "Machine".into();
                r
            },
            Err(
                "Kind=Machine is not handled: this webhook admits vitistack.io/v1alpha1, Kind=MachineClass only",
            ),
        ),
    ];
    for (what, req, want) in cases {
        let v = a.validate_class(&req);
        let got = if v.allowed { Ok(()) } else { Err(message(&v)) };
        assert_eq!(got, want.map_err(str::to_owned), "{what}");
    }
}

#[test]
fn nothing_is_admitted_before_the_classes_are_read() {
    let a = Admission::with_catalog(crate::classes::LiveCatalog::watched(Catalog::default()))
        .expect("admission");
    let v = a.validate_class(&request(
        "CREATE",
        class(
            "xlarge",
            json!({"cpu": {"cores": 4}, "memory": {"size": "1Gi"}}),
        ),
        None,
    ));
    assert!(!v.allowed);
    assert_eq!(v.status.and_then(|s| s.code), Some(503));
}
