use super::*;

fn array_of(n: usize) -> String {
    format!("[{}]", vec!["\"a\""; n].join(","))
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn values_are_counted_across_the_whole_review() {
    // The array itself is one value.
    assert_eq!(within_limits(array_of(MAX_VALUES - 1).as_bytes()), Ok(()));
    assert_eq!(
        within_limits(array_of(MAX_VALUES).as_bytes()),
        Err(Exceeded::Values)
    );
    let many_fields = format!(
        "{{{}}}",
        (0..MAX_VALUES)
            .map(|i| format!("\"f{i}\":{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(within_limits(many_fields.as_bytes()), Err(Exceeded::Values));
}

#[test]
fn depth_is_bounded_below_the_parsers_own_limit() {
    // nested(d): d arrays around a number at depth d.
    assert_eq!(within_limits(nested(MAX_DEPTH).as_bytes()), Ok(()));
    assert_eq!(
        within_limits(nested(MAX_DEPTH + 1).as_bytes()),
        Err(Exceeded::Depth)
    );
    assert_eq!(
        within_limits(nested(100_000).as_bytes()),
        Err(Exceeded::Depth)
    );
}

#[test]
fn what_is_not_json_is_left_to_the_decoder() {
    assert_eq!(within_limits(b"not json"), Ok(()));
    assert_eq!(within_limits(b""), Ok(()));
}

#[test]
fn spec_shapes_over_the_bounds_are_named_by_field() {
    use serde_json::json;
    assert!(shape_errors(&json!({"disks": vec![json!({"name": "d"}); MAX_ITEMS]})).is_empty());
    let errors = shape_errors(&json!({
        "bootOrder": vec!["x"; MAX_ITEMS + 1],
        "cloudInit": {"userData": "x".repeat(MAX_STRING_BYTES + 1)},
        "disks": [{"name": "d"}, Value::Object((0..=MAX_FIELDS).map(|i| (format!("f{i}"), json!(i))).collect())],
    }));
    let rendered: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        rendered,
        [
            "spec.bootOrder: Too many: 257: must have at most 256 items",
            "spec.cloudInit.userData: Too long: may not be more than 65536 bytes",
            "spec.disks[1]: Forbidden: must have at most 64 fields",
        ]
    );
    let wide = Value::Array(vec![json!(vec!["x"; MAX_ITEMS + 1]); MAX_ITEMS]);
    assert_eq!(shape_errors(&wide).len(), MAX_CAUSES);
}

/// JSON values in `body`, as [`within_limits`] counts them.
fn values_in(body: &[u8]) -> usize {
    let (values, found) = (Cell::new(0), Cell::new(None));
    let walk = Walk {
        depth: 0,
        values: &values,
        found: &found,
    };
    walk.deserialize(&mut serde_json::Deserializer::from_slice(body))
        .expect("within the limits");
    values.get()
}

/// An UPDATE of the largest Machine there can be, as kube-apiserver sends it: every list at
/// its bound with every field of each item set, inline cloud-init at its bounds, a status,
/// the operator's finalizer and record (`resolve`'s own), managedFields (the CRD's lists are
/// atomic, so they name each list, not each item), before and after; with `last_applied`,
/// also `kubectl apply`'s client-side copy of the spec.
fn review_at_every_limit(last_applied: bool) -> String {
    use crate::api::machine::{MAX_DISKS, MAX_NETWORKS, MachineSpec};
    use crate::machine::{Catalog, DEFAULTS_ANNOTATION, FINALIZER, resolve};
    use serde_json::json;
    let disks: Vec<Value> = (0..MAX_DISKS)
        .map(|i| {
            json!({"name": format!("data-{i:03}"), "size": "100Gi",
                   "storageClass": "fast-replicated", "accessMode": "ReadWriteOnce",
                   "volumeMode": "Filesystem"})
        })
        .collect();
    let networks: Vec<Value> = (0..MAX_NETWORKS)
        .map(|i| {
            json!({"name": format!("eth{i}"), "networkName": format!("vlan-{i:03}"),
                   "model": "virtio", "macAddress": format!("52:54:00:12:34:{i:02x}")})
        })
        .collect();
    let spec = json!({
        "template": "large", "running": true, "bootOrder": ["disk", "network", "cdrom"],
        "resources": {"cpu": {"cores": 4, "threads": 2, "sockets": 2},
                      "memory": {"size": "64Gi"}},
        "disks": disks, "networks": networks,
        "cloudInit": {"userData": "u".repeat(2048), "networkData": "n".repeat(16 * 1024)},
        "domain": {"machine": {"type": "pc-q35"},
                   "features": {"acpi": true, "apic": true, "hyperv": false},
                   "firmware": {"bootloader": {"efi": true, "secureBoot": true}}},
    });
    let typed: MachineSpec = serde_json::from_value(spec.clone()).expect("a Machine spec");
    let record = resolve(&typed, None, &Catalog::default()).from_template;
    let mut annotations =
        json!({DEFAULTS_ANNOTATION: serde_json::to_string(&record).expect("record")});
    if last_applied {
        annotations["kubectl.kubernetes.io/last-applied-configuration"] = json!(spec.to_string());
    }
    let managed = |manager: &str, fields: Value| {
        json!({"manager": manager, "operation": "Update", "apiVersion": "vitistack.io/v1alpha1",
               "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields})
    };
    let spec_fields: serde_json::Map<String, Value> = [
        "template",
        "running",
        "bootOrder",
        "resources",
        "disks",
        "networks",
        "cloudInit",
        "domain",
    ]
    .into_iter()
    .map(|f| (format!("f:{f}"), json!({})))
    .collect();
    let status_fields = json!({"f:status": {"f:phase": {}, "f:conditions": {}, "f:vmName": {}}});
    let condition = |kind: &str| {
        json!({"type": kind, "status": "True", "reason": "Running",
               "message": "the VirtualMachine is running",
               "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 7})
    };
    let conditions = [
        "Ready",
        "VirtualMachineReady",
        "StorageReady",
        "NetworkReady",
    ]
    .map(condition);
    let name = "a-machine-with-a-rather-long-name";
    let object = json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {
            "name": name, "namespace": "team-a", "uid": "6f1c2d3e-0000-4000-8000-00000000abcd",
            "resourceVersion": "4711", "generation": 7,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": [FINALIZER], "annotations": annotations,
            "managedFields": [
                managed("kubectl-client-side-apply", json!({"f:spec": spec_fields})),
                managed("kubevirt-operator", status_fields),
            ],
        },
        "spec": spec,
        "status": {
            "phase": "Running", "vmName": name, "vmiName": name, "nodeName": "worker-01",
            "ipAddresses": ["10.0.0.7", "fd00::7"], "observedGeneration": 7,
            "lastUpdated": "2026-01-01T00:00:00Z", "conditions": conditions,
        },
    });
    let kind = json!({"group": "vitistack.io", "version": "v1alpha1", "kind": "Machine"});
    let resource = json!({"group": "vitistack.io", "version": "v1alpha1", "resource": "machines"});
    let user = json!({"username": "alice@example.com", "uid": "1234",
                      "groups": ["team-a", "system:authenticated"]});
    let options = json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions",
                         "fieldManager": "kubectl-client-side-apply"});
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "a1b2c3d4-0000-4000-8000-000000000001", "kind": kind, "requestKind": kind,
        "resource": resource, "name": name, "namespace": "team-a", "operation": "UPDATE",
        "userInfo": user, "object": object, "oldObject": object, "dryRun": false,
        "options": options,
    }})
    .to_string()
}

/// The bounds leave room: the largest Machine's review holds fewer than 10,000 values (a fifth of
/// [`MAX_VALUES`]; about 3,600), and fits the small admission lane (about 110 KB) unless
/// `kubectl apply` (client-side) added its copy of the spec (about 230 KB).
#[test]
fn a_machine_at_every_limit_is_far_within_them() {
    use crate::admission::lanes::SMALL_BODY_BYTES;
    let review = review_at_every_limit(false);
    let values = values_in(review.as_bytes());
    assert!(values < 10_000, "{values} values");
    assert!(review.len() < SMALL_BODY_BYTES, "{} bytes", review.len());
    let applied = review_at_every_limit(true);
    let values = values_in(applied.as_bytes());
    assert!(values < 10_000, "{values} values");
    assert!(applied.len() > SMALL_BODY_BYTES, "{} bytes", applied.len());
}

#[test]
fn truncation_keeps_characters_whole_and_says_what_was_cut() {
    assert_eq!(truncate("short", 10), "short");
    assert_eq!(truncate("ééé", 3), "é... (4 more bytes)");
    assert_eq!(
        truncate(&"x".repeat(600), 512).len(),
        512 + "... (88 more bytes)".len()
    );
}
