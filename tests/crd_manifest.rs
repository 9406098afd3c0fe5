//! The committed CRDs are exactly what the Rust types generate.

use kubevirt_operator::api::crd;

const COMMITTED: &str = include_str!("../manifests/crds.yaml");

#[test]
fn committed_crds_match_the_rust_types() {
    let generated = crd::to_yaml().expect("CRDs serialise");
    assert!(
        generated == COMMITTED,
        "manifests/crds.yaml is out of date; regenerate it with:\n  cargo run -- crd > manifests/crds.yaml"
    );
}

#[test]
fn machine_crd_has_the_contracted_shape() {
    let machine = &crd::all()[0];
    assert_eq!(
        machine.metadata.name.as_deref(),
        Some("machines.vitistack.io")
    );
    assert_eq!(machine.spec.scope, "Namespaced");
    assert_eq!(
        machine.spec.names.short_names.as_deref(),
        Some(&["m".to_owned()][..])
    );
    let version = &machine.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(
        version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some(),
        "status subresource"
    );
    let columns: Vec<&str> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        columns,
        ["Template", "Phase", "Storage", "VM", "Node", "IP", "Age"]
    );
    // README: Storage is the StorageReady condition's reason (a CDI phase while importing).
    let storage = version
        .additional_printer_columns
        .iter()
        .flatten()
        .find(|c| c.name == "Storage")
        .map(|c| c.json_path.as_str());
    assert_eq!(
        storage,
        Some(r#".status.conditions[?(@.type=="StorageReady")].reason"#)
    );
    let schema = serde_json::to_value(
        version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref()),
    )
    .unwrap();
    let spec = &schema["properties"]["spec"];
    assert!(
        spec["description"].as_str().is_some_and(|d| !d.is_empty()),
        "kubectl explain needs descriptions"
    );
    for field in [
        "template",
        "resources",
        "disks",
        "networks",
        "cdroms",
        "bootOrder",
        "cloudInit",
        "domain",
        "running",
    ] {
        assert!(
            spec["properties"][field]["description"].is_string(),
            "spec.{field} has no description"
        );
    }
    assert_eq!(
        spec["properties"]["resources"]["properties"]["cpu"]["properties"]["cores"]["maximum"]
            .as_f64(),
        Some(256.0)
    );
    assert_eq!(
        spec["properties"]["disks"]["items"]["required"],
        serde_json::json!(["name"])
    );
    let source = &spec["properties"]["disks"]["items"]["properties"]["source"]["properties"];
    for kind in ["http", "registry", "pvc", "dataSource"] {
        assert!(source[kind].is_object(), "disks[].source.{kind}");
    }
    assert_eq!(source["http"]["properties"]["url"]["maxLength"], 2048);
    assert_eq!(spec["properties"]["cdroms"]["maxItems"], 4);
    let status = &schema["properties"]["status"]["properties"];
    assert_eq!(status["disks"]["maxItems"], 256);
    assert!(status["vmStatus"]["description"].is_string());
}

/// `kubectl get mc`: cores, memory, root disk, default and enabled; cluster-scoped.
#[test]
fn machine_class_crd_has_the_contracted_shape() {
    let class = crd::all()
        .into_iter()
        .find(|c| c.spec.names.kind == "MachineClass")
        .expect("the MachineClass CRD");
    assert_eq!(
        class.metadata.name.as_deref(),
        Some("machineclasses.vitistack.io")
    );
    assert_eq!(class.spec.scope, "Cluster");
    assert_eq!(
        class.spec.names.short_names.as_deref(),
        Some(&["mc".to_owned()][..])
    );
    let version = &class.spec.versions[0];
    let columns: Vec<(&str, &str)> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Cores", ".spec.cpu.cores"),
            ("Memory", ".spec.memory.size"),
            ("Root Disk", r#".spec.disks[?(@.name=="root")].size"#),
            ("Default", ".spec.default"),
            ("Enabled", ".spec.enabled"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    );
    let schema = serde_json::to_value(
        version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref()),
    )
    .expect("schema");
    let spec = &schema["properties"]["spec"]["properties"];
    // Printed as true/false, never blank: the API server fills in the defaults.
    assert_eq!(spec["default"]["default"], false);
    assert_eq!(spec["enabled"]["default"], true);
    assert_eq!(
        spec["disks"]["items"]["required"],
        serde_json::json!(["name", "size"])
    );
    assert!(
        spec["disks"]["items"]["properties"]["name"]
            .get("default")
            .is_none()
    );
}
