//! Every example's DataVolumes and VM checked against CDI's and KubeVirt's real CRD schemas
//! (`tests/fixtures/crds/`): valid, and with no field the API server would prune.

use super::*;

const EXAMPLES: &[(&str, &str)] = &[
    (
        "debian-http",
        include_str!("../../../../../../examples/debian-http.yaml"),
    ),
    (
        "registry-containerdisk",
        include_str!("../../../../../../examples/registry-containerdisk.yaml"),
    ),
    (
        "golden-clone",
        include_str!("../../../../../../examples/golden-clone.yaml"),
    ),
    (
        "installer-iso",
        include_str!("../../../../../../examples/installer-iso.yaml"),
    ),
    (
        "basic",
        include_str!("../../../../../../examples/basic.yaml"),
    ),
    (
        "migratable",
        include_str!("../../../../../../examples/migratable.yaml"),
    ),
    (
        "overrides",
        include_str!("../../../../../../examples/overrides.yaml"),
    ),
    (
        "cloud-init",
        include_str!("../../../../../../examples/cloud-init.yaml"),
    ),
];
const DV_CRD: &str =
    include_str!("../../../../../../tests/fixtures/crds/datavolumes.cdi.kubevirt.io.yaml");
const VM_CRD: &str =
    include_str!("../../../../../../tests/fixtures/crds/virtualmachines.kubevirt.io.yaml");

/// The `openAPIV3Schema` of a CRD fixture's only version.
fn crd_schema(yaml: &str) -> Value {
    let crd = Value::deserialize(serde_yaml::Deserializer::from_str(yaml)).expect("CRD YAML");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Paths in `value` the API server would prune: fields its structural schema does not declare.
fn pruned(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        return;
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{path}.{k}");
                if let Some(s) = schema["properties"].get(k) {
                    pruned(s, v, &p, out);
                } else if schema["additionalProperties"].is_object() {
                    pruned(&schema["additionalProperties"], v, &p, out);
                } else if !path.is_empty() || !matches!(k.as_str(), "apiVersion" | "kind") {
                    out.push(p);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                pruned(&schema["items"], v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn check_against(schema: &Value, check: &SchemaCheck, object: &Value, what: &str) {
    let errors: Vec<String> = check
        .check(object)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        errors.is_empty(),
        "{what} breaks the CRD schema: {errors:?}\n{object:#}"
    );
    let mut unknown = Vec::new();
    // metadata is the API server's own, not the CRD's.
    let mut body = object.clone();
    body.as_object_mut().map(|o| o.remove("metadata"));
    pruned(schema, &body, "", &mut unknown);
    assert!(
        unknown.is_empty(),
        "{what}: the API server would prune {unknown:?}"
    );
}

#[test]
fn every_examples_data_volumes_and_vm_match_the_real_crds() {
    let dv_schema = crd_schema(DV_CRD);
    let vm_schema = crd_schema(VM_CRD);
    let dv_check = SchemaCheck::from_openapi(&dv_schema).expect("DataVolume schema compiles");
    let vm_check = SchemaCheck::from_openapi(&vm_schema).expect("VirtualMachine schema compiles");
    let mut seen_dvs = 0;
    for (name, text) in EXAMPLES {
        let mut m: Machine = serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        m.metadata.uid = Some(UID.into());
        let d = derived(&pin_all(m));
        assert!(d.problems.is_empty(), "{name}: {:?}", d.problems);
        for dv in dvs(&d) {
            check_against(&dv_schema, &dv_check, &dv, &format!("{name}: DataVolume"));
            seen_dvs += 1;
        }
        let vm = serde_json::to_value(d.vm.as_ref().expect("a VM")).unwrap();
        check_against(
            &vm_schema,
            &vm_check,
            &vm,
            &format!("{name}: VirtualMachine"),
        );
    }
    assert_eq!(seen_dvs, 4, "one DataVolume per new example");
}

#[test]
fn the_pruning_check_catches_a_misspelt_field() {
    let schema = crd_schema(DV_CRD);
    let mut out = Vec::new();
    pruned(
        &schema,
        &json!({"spec": {"storage": {"storageClass": "x"}}}),
        "",
        &mut out,
    );
    assert_eq!(out, [".spec.storage.storageClass"]);
    let check = SchemaCheck::from_openapi(&schema).unwrap();
    assert_eq!(
        check.check(&json!({"spec": {"sourceRef": {"name": "x"}, "storage": {"accessModes": "ReadWriteOnce"}}})).len(),
        2,
        "a missing required field and a wrong type"
    );
}
