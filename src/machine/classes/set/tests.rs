use serde_json::{Value, json};

use super::*;

fn object(name: &str, created: &str, spec: Value) -> MachineClass {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineClass",
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": spec
    }))
    .expect("class")
}

fn sized(cores: i64) -> Value {
    json!({"cpu": {"cores": cores}, "memory": {"size": "8Gi"}})
}

fn marked(cores: i64) -> Value {
    let mut s = sized(cores);
    s["default"] = json!(true);
    s
}

#[test]
fn built_ins_are_there_and_an_object_of_the_same_name_replaces_one() {
    let built_in = Classes::built_in();
    assert_eq!(built_in.enabled(), ["large", "medium", "small"]);
    assert!(built_in.marked_default().is_none());
    let (c, warnings) = Classes::with_objects(&[
        object("medium", "2026-01-01T00:00:00Z", sized(6)),
        object("xlarge", "2026-01-01T00:00:00Z", sized(8)),
    ]);
    assert!(warnings.is_empty());
    assert_eq!(c.enabled(), ["large", "medium", "small", "xlarge"]);
    let cores = |n| match c.lookup(n) {
        Lookup::Found(class) => Some(class.cores),
        _ => None,
    };
    assert_eq!(
        (cores("medium"), cores("xlarge"), cores("small")),
        (Some(6), Some(8), Some(1))
    );
    assert_eq!(c.lookup("huge"), Lookup::Unknown);
}

#[test]
fn a_disabled_class_is_found_but_not_listed() {
    let mut spec = sized(2);
    spec["enabled"] = json!(false);
    let (c, _) = Classes::with_objects(&[object("small", "2026-01-01T00:00:00Z", spec)]);
    assert_eq!(c.enabled(), ["large", "medium"]);
    assert!(matches!(c.lookup("small"), Lookup::Found(class) if !class.enabled));
}

#[test]
fn an_invalid_object_is_not_usable_and_says_why() {
    let (c, warnings) = Classes::with_objects(&[object(
        "broken",
        "2026-01-01T00:00:00Z",
        json!({"memory": {"size": "8Gi"}}),
    )]);
    let why = "spec.cpu.cores: Required value: every class sets its cores";
    assert_eq!(c.lookup("broken"), Lookup::Invalid(why));
    assert_eq!(
        warnings,
        [format!("MachineClass \"broken\" is not usable: {why}")]
    );
    assert!(!c.enabled().contains(&"broken".to_owned()));
}

/// Table: which class is the default, as StorageClasses do it (the newest marked one).
#[test]
fn the_newest_class_marked_default_is_the_default() {
    let disabled_marked = {
        let mut s = marked(2);
        s["enabled"] = json!(false);
        s
    };
    let cases: Vec<(&str, Vec<MachineClass>, Option<&str>, usize)> = vec![
        (
            "none marked",
            vec![object("a", "2026-01-01T00:00:00Z", sized(1))],
            None,
            0,
        ),
        (
            "one marked",
            vec![object("a", "2026-01-01T00:00:00Z", marked(1))],
            Some("a"),
            0,
        ),
        (
            "two marked: the newer",
            vec![
                object("old", "2026-01-01T00:00:00Z", marked(1)),
                object("new", "2026-02-01T00:00:00Z", marked(1)),
            ],
            Some("new"),
            1,
        ),
        (
            "two marked at the same second: by name",
            vec![
                object("b", "2026-01-01T00:00:00Z", marked(1)),
                object("a", "2026-01-01T00:00:00Z", marked(1)),
            ],
            Some("a"),
            1,
        ),
        (
            "a disabled class is never the default",
            vec![object(
                "off",
                "2026-02-01T00:00:00Z",
                disabled_marked.clone(),
            )],
            None,
            1,
        ),
        (
            "the newest usable one",
            vec![
                object("off", "2026-02-01T00:00:00Z", disabled_marked),
                object("on", "2026-01-01T00:00:00Z", marked(1)),
            ],
            Some("on"),
            2,
        ),
    ];
    for (what, objects, default, warnings) in cases {
        let (c, w) = Classes::with_objects(&objects);
        assert_eq!(c.marked_default(), default, "{what}");
        assert_eq!(w.len(), warnings, "{what}: {w:?}");
    }
}

#[test]
fn a_second_default_is_refused_and_the_default_itself_may_be_rewritten() {
    let (c, _) = Classes::with_objects(&[object("medium", "2026-01-01T00:00:00Z", marked(2))]);
    assert_eq!(
        c.default_conflict("xlarge", true).map(|e| e.to_string()),
        Some("spec.default: Forbidden: at most one MachineClass may be the default, and medium already is: set its spec.default to false first".to_owned())
    );
    assert!(c.default_conflict("xlarge", false).is_none());
    assert!(c.default_conflict("medium", true).is_none(), "itself");
    assert!(
        Classes::built_in()
            .default_conflict("xlarge", true)
            .is_none()
    );
}
