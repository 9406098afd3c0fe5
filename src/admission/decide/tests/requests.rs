//! Requests off the common path: kinds and operations not handled, the status subresource,
//! generated names, empty specs, nulls, and how much a denial says.

use super::*;

#[test]
fn requests_it_does_not_handle_are_denied_with_a_reason() {
    let a = admission();
    let m = machine(json!({}));
    let cases = [
        (
            request("DELETE", None, Some(m.clone())),
            "operation \"DELETE\" is not handled",
        ),
        (
            request("PATCH", Some(m.clone()), None),
            "operation \"PATCH\" is not handled",
        ),
        (request("CREATE", None, None), "has no object"),
        (
            Request {
                kind: GroupVersionKind {
                    group: "".into(),
                    version: "v1".into(),
                    kind: "Pod".into(),
                },
                ..request("CREATE", Some(m.clone()), None)
            },
            "v1, Kind=Pod is not handled",
        ),
    ];
    for (req, expected) in cases {
        for v in [a.mutate(&req), a.validate(&req)] {
            assert!(!v.allowed);
            assert_eq!(v.status.as_ref().and_then(|s| s.code), Some(400));
            assert!(
                message(&v).contains(expected),
                "{} !~ {expected}",
                message(&v)
            );
        }
    }
}

#[test]
fn status_subresource_is_allowed_untouched() {
    let a = admission();
    let req = Request {
        sub_resource: Some("status".into()),
        ..request("UPDATE", Some(machine(json!({"template": "huge"}))), None)
    };
    let v = a.mutate(&req);
    assert!(v.allowed && v.patch.is_none());
}

#[test]
fn generate_name_objects_mutate_without_a_name() {
    let a = admission();
    let mut m = machine(json!({}));
    m["metadata"] = json!({"generateName": "vm-"});
    let req = Request {
        name: String::new(),
        ..request("CREATE", Some(m), None)
    };
    assert!(a.mutate(&req).allowed);
}

#[test]
fn a_machine_without_spec_gets_every_default() {
    let a = admission();
    let mut m = machine(json!({}));
    m.as_object_mut().unwrap().remove("spec");
    let out = mutated(&a, &request("CREATE", Some(m), None));
    assert_eq!(out["spec"]["template"], json!("medium"));
    assert_eq!(out["spec"]["disks"][0]["size"], json!("40Gi"));
}

#[test]
fn a_missing_name_is_reported_with_every_other_error() {
    let a = admission();
    let v = a.mutate(&request(
        "CREATE",
        Some(machine(
            json!({"disks": [{"size": "1Gi"}], "bootOrder": ["usb"]}),
        )),
        None,
    ));
    assert_eq!(
        message(&v),
        r#"Machine.vitistack.io "vm" is invalid: [spec.disks[0].name: Required value, spec.bootOrder[0]: Unsupported value: "usb": supported values: "cdrom", "disk", "network"]"#
    );
}

#[test]
fn nulls_are_pruned_like_the_api_server_does() {
    let a = admission();
    let out = mutated(
        &a,
        &request(
            "CREATE",
            Some(machine(
                json!({"template": null, "resources": {"cpu": null}}),
            )),
            None,
        ),
    );
    assert_eq!(out["spec"]["template"], json!("medium"));
}

/// What is said back is bounded: the first 100 causes and one counting the rest, each cause cut
/// at 512 bytes, the message at 16 KiB.
#[test]
fn a_denial_says_a_bounded_amount() {
    let spec = FieldPath::new("spec");
    let disks = spec.child("disks");
    let errors: Vec<FieldError> = (0..150)
        .map(|i| FieldError::forbidden(&disks.index(i), "y".repeat(1000)))
        .collect();
    let status = invalid("vm", &errors);
    let causes = status.details.and_then(|d| d.causes).expect("causes");
    assert_eq!(causes.len(), 101);
    for cause in &causes[..100] {
        let message = cause.message.as_deref().unwrap_or_default();
        // "Forbidden: " and 1,000 bytes: 512 kept.
        assert_eq!(
            message,
            format!("Forbidden: {}... (499 more bytes)", "y".repeat(501))
        );
    }
    assert_eq!(causes[100].field.as_deref(), Some("spec"));
    assert_eq!(
        causes[100].message.as_deref(),
        Some("and 50 more errors not shown")
    );
    let message = status.message.unwrap_or_default();
    let (kept, cut) = message.split_at(16 * 1024);
    assert!(kept.starts_with(r#"Machine.vitistack.io "vm" is invalid: [spec.disks[0]: "#));
    assert!(
        cut.starts_with("... (") && cut.ends_with(" more bytes)"),
        "{cut}"
    );
}
