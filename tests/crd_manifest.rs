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
    // docs/user/machines-and-classes.md: Storage is the StorageReady condition's reason (a CDI phase while importing).
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

/// `kubectl get msnap` and `kubectl get mrestore`: namespaced, short names, printer columns, the
/// names they hold required, and a Machine's schedule bounded (issue 21).
#[test]
fn snapshot_and_restore_crds_have_the_contracted_shape() {
    let all = crd::all();
    let find = |kind: &str| {
        all.iter()
            .find(|c| c.spec.names.kind == kind)
            .unwrap_or_else(|| panic!("the {kind} CRD"))
    };
    let columns = |c: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| -> Vec<(String, String)> {
        c.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.json_path.clone()))
            .collect()
    };
    let schema = |c: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
        serde_json::to_value(c.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()))
            .expect("schema")
    };
    let owned = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };

    let snap = find("MachineSnapshot");
    assert_eq!(
        snap.metadata.name.as_deref(),
        Some("machinesnapshots.vitistack.io")
    );
    assert_eq!(snap.spec.scope, "Namespaced");
    assert_eq!(
        snap.spec.names.short_names.as_deref(),
        Some(&["msnap".to_owned()][..])
    );
    assert_eq!(
        columns(snap),
        owned(&[
            ("Machine", ".spec.machineName"),
            ("Phase", ".status.phase"),
            ("Ready", ".status.readyToUse"),
            ("Taken", ".status.creationTime"),
            ("Error", ".status.error"),
            ("Age", ".metadata.creationTimestamp"),
        ])
    );
    let s = schema(snap);
    assert_eq!(
        s["properties"]["spec"]["required"],
        serde_json::json!(["machineName"])
    );
    assert!(s["properties"]["status"]["properties"]["readyToUse"].is_object());

    let restore = find("MachineRestore");
    assert_eq!(
        restore.metadata.name.as_deref(),
        Some("machinerestores.vitistack.io")
    );
    assert_eq!(restore.spec.scope, "Namespaced");
    assert_eq!(
        restore.spec.names.short_names.as_deref(),
        Some(&["mrestore".to_owned()][..])
    );
    assert_eq!(
        columns(restore),
        owned(&[
            ("Machine", ".spec.machineName"),
            ("Snapshot", ".spec.snapshotName"),
            ("Phase", ".status.phase"),
            ("Completed", ".status.completedAt"),
            ("Age", ".metadata.creationTimestamp"),
        ])
    );
    let r = schema(restore);
    assert_eq!(
        r["properties"]["spec"]["required"],
        serde_json::json!(["machineName", "snapshotName"])
    );

    let machine = schema(find("Machine"));
    let snapshots = &machine["properties"]["spec"]["properties"]["snapshots"];
    assert_eq!(snapshots["required"], serde_json::json!(["schedule"]));
    assert_eq!(snapshots["properties"]["keep"]["minimum"], 1.0);
    assert_eq!(snapshots["properties"]["keep"]["maximum"], 100.0);
}

/// Issue 22: `kubectl get kubevirtconfigs` (cluster-scoped): Phase, Machines, Age (and Reason
/// with `-o wide`); the Secret's name and namespace required and DNS names; the status carries
/// the reason, what is served and one Ready condition.
#[test]
fn kubevirt_config_crd_has_the_contracted_shape() {
    let all = crd::all();
    let kc = all
        .iter()
        .find(|c| c.spec.names.kind == "KubevirtConfig")
        .expect("the KubevirtConfig CRD");
    assert_eq!(
        kc.metadata.name.as_deref(),
        Some("kubevirtconfigs.vitistack.io")
    );
    assert_eq!(kc.spec.scope, "Cluster");
    let version = &kc.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(
        version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some(),
        "status subresource"
    );
    let columns: Vec<(&str, Option<i32>)> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.priority))
        .collect();
    assert_eq!(
        columns,
        [
            ("Phase", None),
            ("Reason", Some(1)),
            ("Machines", None),
            ("Age", None)
        ]
    );
    let schema = serde_json::to_value(
        version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref()),
    )
    .expect("schema");
    let spec = &schema["properties"]["spec"];
    assert_eq!(
        spec["required"],
        serde_json::json!(["kubeconfigSecretRef", "secretNamespace"])
    );
    for field in ["kubeconfigSecretRef", "secretNamespace"] {
        assert!(spec["properties"][field]["pattern"].is_string(), "{field}");
        assert!(
            spec["properties"][field].get("default").is_none(),
            "{field}"
        );
    }
    assert_eq!(
        spec["properties"]["allowCrossNamespaceClones"]["default"],
        false
    );
    let status = &schema["properties"]["status"]["properties"];
    for field in [
        "phase",
        "reason",
        "message",
        "kubevirtInstalled",
        "cdiInstalled",
        "multusInstalled",
        "machines",
        "lastChecked",
        "conditions",
    ] {
        assert!(status[field].is_object(), "status.{field}");
    }
}
