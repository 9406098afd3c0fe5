use serde_json::json;

use super::*;
use crate::admission::limits::MAX_ITEMS;
use crate::admission::review::GroupVersionKind;
use crate::machine::{FINALIZER, FieldError, FieldPath};

fn admission() -> Admission {
    Admission::new(Catalog::default()).expect("schema compiles")
}

fn machine(spec: Value) -> Value {
    json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
           "metadata": {"name": "vm", "namespace": "default"}, "spec": spec})
}

fn request(operation: &str, object: Option<Value>, old: Option<Value>) -> Request {
    Request {
        uid: "u1".into(),
        kind: GroupVersionKind {
            group: "vitistack.io".into(),
            version: "v1alpha1".into(),
            kind: "Machine".into(),
        },
        name: "vm".into(),
        namespace: Some("default".into()),
        operation: operation.into(),
        object,
        old_object: old,
        ..Request::default()
    }
}

fn mutated(a: &Admission, req: &Request) -> Value {
    let verdict = a.mutate(req);
    assert!(verdict.allowed, "{:?}", verdict.status);
    let mut object = req.object.clone().expect("object");
    json_patch::patch(&mut object, &verdict.patch.expect("a patch")).expect("patch applies");
    object
}

fn message(v: &Verdict) -> String {
    v.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

#[test]
fn mutation_applies_template_and_records_provenance() {
    let a = admission();
    let out = mutated(
        &a,
        &request(
            "CREATE",
            Some(machine(
                json!({"template": "small", "disks": [{"name": "data", "size": "100Gi"}]}),
            )),
            None,
        ),
    );
    assert_eq!(
        out["spec"]["resources"],
        json!({"cpu": {"cores": 1, "threads": 1, "sockets": 1}, "memory": {"size": "2Gi"}})
    );
    assert_eq!(
        out["spec"]["disks"],
        json!([{"name": "root", "size": "20Gi"}, {"name": "data", "size": "100Gi"}]),
        "modes are the reconciler's, from the class's StorageProfile"
    );
    assert_eq!(out["spec"]["running"], json!(true));
    assert_eq!(
        out["spec"]["domain"],
        json!({"machine": {"type": "pc-q35"}})
    );
    let record: Value = serde_json::from_str(
        out["metadata"]["annotations"][DEFAULTS_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["resources"]["memory"]["size"], json!("2Gi"));
    assert_eq!(record.get("template"), None, "template was explicit");
}

#[test]
fn mutating_its_own_output_yields_no_patch() {
    let a = admission();
    for spec in [
        json!({}),
        json!({"template": "large", "networks": [{"name": "eth0", "networkName": "n"}],
                                   "cloudInit": {"secretRef": {"name": "s"}}}),
    ] {
        let once = mutated(&a, &request("CREATE", Some(machine(spec.clone())), None));
        let twice = a.mutate(&request("CREATE", Some(once.clone()), None));
        assert!(twice.allowed);
        assert_eq!(twice.patch.map(|p| p.0.len()), Some(0), "{spec}");
        let on_update = a.mutate(&request("UPDATE", Some(once.clone()), Some(once)));
        assert_eq!(on_update.patch.map(|p| p.0.len()), Some(0));
    }
}

#[test]
fn template_change_on_update_rederives_and_keeps_overrides() {
    let a = admission();
    let stored = mutated(
        &a,
        &request(
            "CREATE",
            Some(machine(
                json!({"template": "medium", "resources": {"memory": {"size": "16Gi"}}}),
            )),
            None,
        ),
    );
    let mut edited = stored.clone();
    edited["spec"]["template"] = json!("large");
    let out = mutated(
        &a,
        &request("UPDATE", Some(edited.clone()), Some(stored.clone())),
    );
    assert_eq!(out["spec"]["resources"]["cpu"]["cores"], json!(4));
    assert_eq!(out["spec"]["resources"]["memory"]["size"], json!("16Gi"));
    assert_eq!(out["spec"]["disks"][0]["size"], json!("80Gi"));
    // The provenance survives a client that dropped the annotation (e.g. kubectl replace).
    edited["metadata"]["annotations"] = json!({});
    let out = mutated(&a, &request("UPDATE", Some(edited), Some(stored)));
    assert_eq!(out["spec"]["resources"]["cpu"]["cores"], json!(4));
}

#[test]
fn schema_errors_deny_with_field_paths() {
    let a = admission();
    let v = a.mutate(&request("CREATE", Some(machine(json!({"resources": {"cpu": {"cores": "four"}}, "disks": [{"size": true}], "running": "yes"}))), None));
    assert!(!v.allowed);
    let status = v.status.clone().unwrap();
    assert_eq!(
        (status.code, status.reason.as_deref()),
        (Some(422), Some("Invalid"))
    );
    let msg = message(&v);
    assert!(
        msg.starts_with(r#"Machine.vitistack.io "vm" is invalid: ["#),
        "{msg}"
    );
    for part in [
        r#"spec.resources.cpu.cores: Invalid value: "four": must be of type integer"#,
        "spec.disks[0].name: Required value",
        "spec.disks[0].size: Invalid value: true: must be an integer or a string",
        r#"spec.running: Invalid value: "yes": must be of type boolean"#,
    ] {
        assert!(msg.contains(part), "missing {part:?} in {msg}");
    }
    let causes = status.details.unwrap().causes.unwrap();
    assert!(
        causes
            .iter()
            .any(|c| c.field.as_deref() == Some("spec.resources.cpu.cores")
                && c.reason.as_deref() == Some("FieldValueTypeInvalid"))
    );
}

#[test]
fn semantic_errors_deny_in_both_webhooks() {
    let a = admission();
    let req = request(
        "CREATE",
        Some(machine(
            json!({"template": "huge", "disks": [{"name": "d", "size": "1Gi", "accessMode": "ReadWriteAll"}]}),
        )),
        None,
    );
    for v in [a.mutate(&req), a.validate(&req)] {
        assert!(!v.allowed);
        let msg = message(&v);
        assert!(
            msg.contains(r#"spec.template: Unsupported value: "huge""#),
            "{msg}"
        );
        assert!(msg.contains(r#"spec.disks[0].accessMode: Unsupported value: "ReadWriteAll": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce""#), "{msg}");
    }
}

#[test]
fn validate_applies_update_rules_and_warnings() {
    let a = admission();
    let old = mutated(
        &a,
        &request(
            "CREATE",
            Some(machine(
                json!({"disks": [{"name": "data", "size": "10Gi"}]}),
            )),
            None,
        ),
    );
    let mut shrunk = old.clone();
    shrunk["spec"]["disks"][1]["size"] = json!("5Gi");
    let v = a.validate(&request("UPDATE", Some(shrunk), Some(old.clone())));
    assert!(!v.allowed);
    assert!(
        message(&v).contains(
            r#"spec.disks[1].size: Forbidden: disk "data" may not shrink from 10Gi to 5Gi"#
        ),
        "{}",
        message(&v)
    );
    let mut removed = old.clone();
    removed["spec"]["disks"] = json!([old["spec"]["disks"][0].clone()]);
    assert!(
        message(&a.validate(&request("UPDATE", Some(removed), Some(old.clone()))))
            .contains(r#"disk "data" may not be removed"#)
    );
    let mut cdrom = old.clone();
    cdrom["spec"]["bootOrder"] = json!(["cdrom", "disk"]);
    let v = a.validate(&request("UPDATE", Some(cdrom), Some(old)));
    assert!(v.allowed);
    assert_eq!(v.warnings.len(), 1);
}

#[test]
fn unchanged_invalid_specs_do_not_block_metadata_updates() {
    let a = admission();
    let legacy = machine(json!({"template": "huge"}));
    let mut finalizer_removed = legacy.clone();
    finalizer_removed["metadata"]["finalizers"] = json!([]);
    let req = request("UPDATE", Some(finalizer_removed), Some(legacy));
    assert!(a.mutate(&req).allowed);
    assert!(a.validate(&req).allowed);
}

/// The size bounds skip an UPDATE whose spec is the stored one, as the rules do: a Machine
/// stored over them (before they existed) can still have its metadata edited.
#[test]
fn unchanged_oversized_specs_do_not_block_metadata_updates() {
    let a = admission();
    let oversized = machine(json!({"bootOrder": vec!["disk"; MAX_ITEMS + 1]}));
    let mut finalizer_removed = oversized.clone();
    finalizer_removed["metadata"]["finalizers"] = json!([]);
    let req = request("UPDATE", Some(finalizer_removed.clone()), Some(oversized));
    assert!(a.mutate(&req).allowed);
    assert!(a.validate(&req).allowed);
    // Changed, or created: refused on the bound alone.
    let mut changed = finalizer_removed.clone();
    changed["spec"]["bootOrder"] = json!(vec!["cdrom"; MAX_ITEMS + 1]);
    let too_many = "spec.bootOrder: Too many: 257: must have at most 256 items";
    for req in [
        request("UPDATE", Some(changed), req.old_object.clone()),
        request("CREATE", Some(finalizer_removed), None),
    ] {
        for verdict in [a.mutate(&req), a.validate(&req)] {
            assert!(!verdict.allowed);
            assert!(
                message(&verdict).ends_with(too_many),
                "{}",
                message(&verdict)
            );
        }
    }
}

mod finalizer;
mod requests;
