//! The finalizer: every CREATE gains ours once, beside any other; an UPDATE, or an object being
//! deleted, never does.

use super::*;

fn finalizer_ops(v: &Verdict) -> Vec<Value> {
    v.patch
        .iter()
        .flat_map(|p| p.0.iter())
        .filter_map(|op| serde_json::to_value(op).ok())
        .filter(|op| {
            op["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("/metadata/finalizers"))
        })
        .collect()
}

#[test]
fn create_without_finalizers_gains_ours() {
    let a = admission();
    let req = request("CREATE", Some(machine(json!({}))), None);
    assert_eq!(
        finalizer_ops(&a.mutate(&req)),
        [json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]})]
    );
    assert_eq!(
        mutated(&a, &req)["metadata"]["finalizers"],
        json!([FINALIZER])
    );
    // Dry-run is answered the same: the patch has no side effects.
    let dry = Request {
        dry_run: Some(true),
        ..req
    };
    assert_eq!(
        mutated(&a, &dry)["metadata"]["finalizers"],
        json!([FINALIZER])
    );
}

#[test]
fn create_with_other_finalizers_appends_ours() {
    let a = admission();
    let mut m = machine(json!({}));
    m["metadata"]["finalizers"] = json!(["example.com/keep"]);
    let req = request("CREATE", Some(m), None);
    assert_eq!(
        finalizer_ops(&a.mutate(&req)),
        [json!({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER})]
    );
    assert_eq!(
        mutated(&a, &req)["metadata"]["finalizers"],
        json!(["example.com/keep", FINALIZER])
    );
}

#[test]
fn create_already_carrying_ours_is_not_duplicated() {
    let a = admission();
    for list in [json!([FINALIZER]), json!(["example.com/keep", FINALIZER])] {
        let mut m = machine(json!({}));
        m["metadata"]["finalizers"] = list.clone();
        let req = request("CREATE", Some(m), None);
        assert!(finalizer_ops(&a.mutate(&req)).is_empty(), "{list}");
        assert_eq!(mutated(&a, &req)["metadata"]["finalizers"], list);
    }
}

#[test]
fn create_without_metadata_gets_annotation_and_finalizer() {
    let a = admission();
    let mut m = machine(json!({}));
    m.as_object_mut().unwrap().remove("metadata");
    let out = mutated(&a, &request("CREATE", Some(m), None));
    assert_eq!(out["metadata"]["finalizers"], json!([FINALIZER]));
    assert!(out["metadata"]["annotations"][DEFAULTS_ANNOTATION].is_string());
}

#[test]
fn update_never_adds_the_finalizer() {
    let a = admission();
    let stored = mutated(&a, &request("CREATE", Some(machine(json!({}))), None));
    assert_eq!(stored["metadata"]["finalizers"], json!([FINALIZER]));
    let mut released = stored.clone();
    released["metadata"]["finalizers"] = json!([]);

    // The reconciler removing it at the end of a deletion.
    let mut deleting = released.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    // A user removing it, and a Machine stored before the webhook, each with a spec change
    // (so the webhook does answer with a patch).
    let mut edited = released.clone();
    edited["spec"]["template"] = json!("large");
    let mut legacy = machine(json!({"template": "small"}));
    let legacy_old = legacy.clone();
    legacy["spec"]["running"] = json!(false);

    for (new, old) in [
        (deleting, stored.clone()),
        (released.clone(), stored.clone()),
        (edited, stored),
        (legacy, legacy_old),
    ] {
        let req = request("UPDATE", Some(new.clone()), Some(old));
        let v = a.mutate(&req);
        assert!(v.allowed, "{:?}", v.status);
        assert!(finalizer_ops(&v).is_empty(), "{new}");
        assert_eq!(
            mutated(&a, &req)["metadata"].get("finalizers"),
            new["metadata"].get("finalizers")
        );
    }
}

#[test]
fn an_object_being_deleted_never_gains_it() {
    let a = admission();
    let mut m = machine(json!({}));
    m["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    let v = a.mutate(&request("CREATE", Some(m), None));
    assert!(v.allowed);
    assert!(finalizer_ops(&v).is_empty());
}
