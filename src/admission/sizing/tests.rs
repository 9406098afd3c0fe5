//! Machines and their classes through both webhooks: chosen, refused, recorded, bounded.

use serde_json::{Value, json};

use crate::admission::Admission;
use crate::admission::review::{GroupVersionKind, Request, Verdict};
use crate::api::MachineClass;
use crate::api::names::CLASS_ANNOTATION;
use crate::classes::LiveCatalog;
use crate::machine::{Catalog, DEFAULTS_ANNOTATION};

fn xlarge(cores: i64, extra: Value) -> Value {
    let mut spec = json!({
        "cpu": {"cores": cores}, "memory": {"size": "48Gi"},
        "disks": [{"name": "root", "size": "100Gi", "storageClass": "fast-ssd"}],
        "limits": {"cpu": {"maxCores": 16}, "memory": {"max": "128Gi"}, "disks": {"maxCount": 3}}
    });
    json_patch::merge(&mut spec, &extra);
    json!({"metadata": {"name": "xlarge", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec})
}

/// A catalog the test can change, as the watch does.
fn live(classes: &[Value]) -> LiveCatalog {
    let live = LiveCatalog::watched(Catalog::default());
    publish(&live, classes);
    live
}

fn publish(live: &LiveCatalog, classes: &[Value]) {
    let objects: Vec<MachineClass> = classes
        .iter()
        .map(|c| serde_json::from_value(c.clone()).expect("class"))
        .collect();
    live.publish(&objects);
}

fn request(op: &str, spec: Value, old: Option<&Value>) -> Request {
    let object = json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                        "metadata": {"name": "db", "namespace": "team-a"}, "spec": spec});
    let object = match old {
        // An edit of the stored object: its metadata (and records) as stored.
        Some(old) => {
            let mut o = old.clone();
            o["spec"] = object["spec"].clone();
            o
        }
        None => object,
    };
    Request {
        uid: "u".into(),
        kind: GroupVersionKind {
            group: "vitistack.io".into(),
            version: "v1alpha1".into(),
            kind: "Machine".into(),
        },
        name: "db".into(),
        namespace: Some("team-a".into()),
        operation: op.into(),
        object: Some(object),
        old_object: old.cloned(),
        ..Default::default()
    }
}

/// What the API server stores: the object with the mutation applied, validated.
fn admit(a: &Admission, req: &Request) -> Result<Value, String> {
    let m = a.mutate(req);
    if !m.allowed {
        return Err(message(&m));
    }
    let mut object = req.object.clone().unwrap_or_default();
    if let Some(patch) = &m.patch {
        json_patch::patch(&mut object, patch).expect("patch applies");
    }
    let mut checked = req.clone();
    checked.object = Some(object.clone());
    let v = a.validate(&checked);
    if v.allowed {
        Ok(object)
    } else {
        Err(message(&v))
    }
}

fn message(v: &Verdict) -> String {
    v.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

fn size(m: &Value) -> (i64, String, String, String) {
    let s = &m["spec"];
    (
        s["resources"]["cpu"]["cores"].as_i64().unwrap_or_default(),
        s["resources"]["memory"]["size"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        s["disks"][0]["size"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        s["disks"][0]["storageClass"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[test]
fn a_new_machine_takes_its_class_and_records_it() {
    let a = Admission::with_catalog(live(&[xlarge(4, json!({}))])).expect("admission");
    let stored =
        admit(&a, &request("CREATE", json!({"template": "xlarge"}), None)).expect("admitted");
    assert_eq!(
        size(&stored),
        (4, "48Gi".into(), "100Gi".into(), "fast-ssd".into())
    );
    let annotations = &stored["metadata"]["annotations"];
    let record: Value =
        serde_json::from_str(annotations[CLASS_ANNOTATION].as_str().unwrap()).unwrap();
    assert_eq!(record["name"], "xlarge");
    assert_eq!(
        record["cpu"],
        json!({"cores": 4, "threads": 1, "sockets": 1})
    );
    assert_eq!(record["limits"]["cpu"], json!({"maxCores": 16}));
    let defaults: Value =
        serde_json::from_str(annotations[DEFAULTS_ANNOTATION].as_str().unwrap()).unwrap();
    assert_eq!(defaults["disks"][0]["storageClass"], "fast-ssd");
    // Mutating its own output changes nothing.
    let again = request("UPDATE", stored["spec"].clone(), Some(&stored));
    assert_eq!(a.mutate(&again).patch.map(|p| p.0.len()), Some(0));
}

#[test]
fn unknown_and_disabled_classes_are_refused_for_new_machines_only() {
    let live = live(&[xlarge(4, json!({}))]);
    let a = Admission::with_catalog(live.clone()).expect("admission");
    assert_eq!(
        admit(&a, &request("CREATE", json!({"template": "huge"}), None)),
        Err(r#"Machine.vitistack.io "db" is invalid: spec.template: Unsupported value: "huge": supported values: "large", "medium", "small", "xlarge""#.into())
    );
    let stored =
        admit(&a, &request("CREATE", json!({"template": "xlarge"}), None)).expect("admitted");
    publish(&live, &[xlarge(4, json!({"enabled": false}))]);
    assert_eq!(
        admit(&a, &request("CREATE", json!({"template": "xlarge"}), None)),
        Err(r#"Machine.vitistack.io "db" is invalid: spec.template: Unsupported value: "xlarge": MachineClass "xlarge" is disabled, new Machines may not use it: supported values: "large", "medium", "small""#.into())
    );
    // The Machine that has it keeps it, and may change.
    let mut spec = stored["spec"].clone();
    spec["running"] = json!(false);
    let updated = admit(&a, &request("UPDATE", spec, Some(&stored))).expect("kept class");
    assert_eq!(size(&updated), size(&stored));
    // Moving another Machine onto it is a new use.
    let small = admit(&a, &request("CREATE", json!({"template": "small"}), None)).expect("small");
    let mut moved = small["spec"].clone();
    moved["template"] = json!("xlarge");
    assert!(admit(&a, &request("UPDATE", moved, Some(&small))).is_err());
}

#[test]
fn editing_or_deleting_the_class_leaves_a_machine_as_recorded() {
    let live = live(&[xlarge(4, json!({}))]);
    let a = Admission::with_catalog(live.clone()).expect("admission");
    let stored =
        admit(&a, &request("CREATE", json!({"template": "xlarge"}), None)).expect("admitted");
    for classes in [vec![xlarge(8, json!({"memory": {"size": "64Gi"}}))], vec![]] {
        publish(&live, &classes);
        // An UPDATE that drops every value the class filled in still gets the recorded ones.
        let bare = json!({"template": "xlarge", "running": false});
        let updated = admit(&a, &request("UPDATE", bare, Some(&stored))).expect("updated");
        assert_eq!(size(&updated), size(&stored), "{classes:?}");
        assert_eq!(updated["spec"]["running"], false);
    }
    // Naming the class again as a new Machine takes it as it is now: gone.
    assert!(admit(&a, &request("CREATE", json!({"template": "xlarge"}), None)).is_err());
}

#[test]
fn overrides_beyond_the_limits_are_refused_naming_limit_and_class() {
    let live = live(&[xlarge(4, json!({}))]);
    let a = Admission::with_catalog(live.clone()).expect("admission");
    let over = json!({"template": "xlarge", "resources": {"cpu": {"cores": 32}, "memory": {"size": "256Gi"}},
                      "disks": [{"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}, {"name": "c", "size": "1Gi"}]});
    let denied = admit(&a, &request("CREATE", over, None)).unwrap_err();
    for part in [
        r#"spec.resources.cpu.cores: Invalid value: 32: must be at most 16: limits.cpu.maxCores of MachineClass "xlarge""#,
        r#"spec.resources.memory.size: Invalid value: "256Gi": must be at most 128Gi: limits.memory.max of MachineClass "xlarge""#,
        r#"spec.disks: Too many: 4: must have at most 3 disks, the class's included: limits.disks.maxCount of MachineClass "xlarge""#,
    ] {
        assert!(denied.contains(part), "{part}\n{denied}");
    }
    // The range rule speaks first: one error per field.
    let way_over = json!({"template": "xlarge", "resources": {"cpu": {"cores": 300}}});
    let denied = admit(&a, &request("CREATE", way_over, None)).unwrap_err();
    assert!(!denied.contains("maxCores"), "{denied}");
    // Tightened later: a stored Machine at 16 cores can still be updated, but not grown.
    let stored = admit(
        &a,
        &request(
            "CREATE",
            json!({"template": "xlarge", "resources": {"cpu": {"cores": 16}}}),
            None,
        ),
    )
    .expect("at the limit");
    publish(
        &live,
        &[xlarge(4, json!({"limits": {"cpu": {"maxCores": 8}}}))],
    );
    let mut spec = stored["spec"].clone();
    spec["running"] = json!(false);
    assert!(admit(&a, &request("UPDATE", spec.clone(), Some(&stored))).is_ok());
    spec["resources"]["cpu"]["cores"] = json!(12);
    let denied = admit(&a, &request("UPDATE", spec, Some(&stored))).unwrap_err();
    assert!(
        denied.contains("must be at most 8: limits.cpu.maxCores"),
        "{denied}"
    );
}

#[test]
fn a_class_marked_default_sizes_machines_that_name_none() {
    let live = live(&[xlarge(4, json!({"default": true}))]);
    let a = Admission::with_catalog(live.clone()).expect("admission");
    let stored = admit(&a, &request("CREATE", json!({}), None)).expect("admitted");
    assert_eq!(stored["spec"]["template"], "xlarge");
    assert_eq!(size(&stored).0, 4);
    publish(&live, &[]);
    let stored = admit(&a, &request("CREATE", json!({}), None)).expect("admitted");
    assert_eq!(
        stored["spec"]["template"], "medium",
        "--default-template again"
    );
}

#[test]
fn a_class_record_written_by_the_author_is_not_believed() {
    let a = Admission::with_catalog(live(&[xlarge(4, json!({}))])).expect("admission");
    let mut req = request("CREATE", json!({"template": "xlarge"}), None);
    let forged =
        r#"{"name":"xlarge","cpu":{"cores":64,"threads":1,"sockets":1},"memory":{"size":"1Ti"}}"#;
    req.object.as_mut().unwrap()["metadata"]["annotations"] = json!({CLASS_ANNOTATION: forged});
    let stored = admit(&a, &req).expect("admitted");
    assert_eq!(size(&stored).0, 4);
    assert_ne!(stored["metadata"]["annotations"][CLASS_ANNOTATION], forged);
}

#[test]
fn machines_wait_for_the_first_list_of_classes() {
    let a = Admission::with_catalog(LiveCatalog::watched(Catalog::default())).expect("admission");
    let req = request("CREATE", json!({"template": "small"}), None);
    for v in [a.mutate(&req), a.validate(&req)] {
        assert!(!v.allowed);
        assert_eq!(v.status.and_then(|s| s.code), Some(503));
    }
}
