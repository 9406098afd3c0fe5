use serde_json::json;

use super::*;
use crate::api::MachineClass;

fn catalog() -> Catalog {
    let objects: Vec<MachineClass> = serde_json::from_value(json!([
        {"metadata": {"name": "xlarge"}, "spec": {"cpu": {"cores": 8}, "memory": {"size": "48Gi"}}},
        {"metadata": {"name": "retired"}, "spec": {"cpu": {"cores": 2}, "memory": {"size": "4Gi"}, "enabled": false}},
        {"metadata": {"name": "broken"}, "spec": {"cpu": {"cores": 0}, "memory": {"size": "4Gi"}}}
    ]))
    .expect("classes");
    Catalog::default().with_class_objects(&objects).0
}

/// Table: each name in each use, and what it stands for or why it is refused.
#[test]
fn which_class_a_machine_gets() {
    let c = catalog();
    let recorded = Class::from_record(&c.class("xlarge").unwrap().record).unwrap();
    let old_retired = Class::from_record(&c.class("retired").unwrap().record).unwrap();
    let listed = r#"supported values: "large", "medium", "small", "xlarge""#;
    let cases: Vec<(&str, Use, Result<i64, String>)> = vec![
        ("xlarge", Use::New, Ok(8)),
        ("small", Use::New, Ok(1)),
        ("huge", Use::New, Err(format!(r#"spec.template: Unsupported value: "huge": {listed}"#))),
        ("huge", Use::Kept(None), Err(format!(r#"spec.template: Unsupported value: "huge": {listed}"#))),
        ("retired", Use::New, Err(format!(
            r#"spec.template: Unsupported value: "retired": MachineClass "retired" is disabled, new Machines may not use it: {listed}"#))),
        ("retired", Use::Kept(None), Ok(2)),
        ("retired", Use::Kept(Some(&old_retired)), Ok(2)),
        ("broken", Use::New, Err(r#"spec.template: Invalid value: "broken": MachineClass "broken" is not usable: spec.cpu.cores: Invalid value: 0: must be between 1 and 256, inclusive"#.to_owned())),
        ("xlarge", Use::Kept(Some(&recorded)), Ok(8)),
    ];
    for (name, how, want) in cases {
        let got = choose(&c, name, how)
            .map(|class| class.cores)
            .map_err(|e| e.to_string());
        assert_eq!(got, want, "{name} {how:?}");
    }
}

/// A record outlives its class: deleted, or edited to other values.
#[test]
fn a_kept_class_is_the_recorded_one() {
    let mut spec: crate::api::MachineClassSpec =
        serde_json::from_value(json!({"cpu": {"cores": 4}, "memory": {"size": "16Gi"}})).unwrap();
    let recorded = Class::from_spec("gone", &spec).unwrap();
    assert_eq!(
        choose(&catalog(), "gone", Use::Kept(Some(&recorded))).map(|c| c.cores),
        Ok(4)
    );
    assert!(choose(&catalog(), "gone", Use::New).is_err());
    spec.cpu.as_mut().unwrap().cores = Some(64);
    let (edited, _) = Catalog::default().with_class_objects(&[MachineClass::new("xlarge", spec)]);
    let old = Class::from_record(&catalog().class("xlarge").unwrap().record).unwrap();
    assert_eq!(
        choose(&edited, "xlarge", Use::Kept(Some(&old))).map(|c| c.cores),
        Ok(8)
    );
    assert_eq!(choose(&edited, "xlarge", Use::New).map(|c| c.cores), Ok(64));
}

#[test]
fn the_recorded_class_of_a_stored_machine() {
    let c = catalog();
    let record = &c.class("xlarge").unwrap().record;
    assert_eq!(
        record,
        r#"{"name":"xlarge","cpu":{"cores":8,"threads":1,"sockets":1},"memory":{"size":"48Gi"}}"#
    );
    let cores = |r: Option<Class>| r.map(|c| c.cores);
    assert_eq!(
        cores(recorded_class(Some(record), true, Some("xlarge"))),
        Some(8)
    );
    // Defaulted before classes existed: the built-in of its name.
    assert_eq!(cores(recorded_class(None, true, Some("large"))), Some(4));
    assert_eq!(cores(recorded_class(None, true, Some("xlarge"))), None);
    // Never through the webhook, or a record that does not read.
    assert_eq!(cores(recorded_class(None, false, Some("large"))), None);
    assert_eq!(cores(recorded_class(Some("{"), true, Some("large"))), None);
}
