use serde_json::{Value, json};

use super::*;

/// A GPU class: two devices, pinned Skylake CPUs on 1Gi hugepages, on the GPU nodes.
fn gpu_spec() -> Value {
    json!({
        "cpu": {"cores": 4, "dedicated": true, "model": "Skylake-Server"},
        "memory": {"size": "16Gi", "hugepages": {"pageSize": "1Gi"}},
        "gpus": [{"name": "gpu1", "deviceName": "nvidia.com/GA102GL_A10"}],
        "hostDevices": [{"name": "nic1", "deviceName": "intel.com/qat"}],
        "placement": {"nodeSelector": {"gpu": "a10"},
                      "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "limits": {"cpu": {"models": ["host-passthrough"]}}
    })
}

fn class_errors(spec: Value) -> Vec<String> {
    let spec: MachineClassSpec = serde_json::from_value(spec).expect("spec");
    let memory = (spec.memory.as_ref())
        .and_then(|m| m.size.as_ref())
        .and_then(|q| q.parse().ok());
    let mut errors = Vec::new();
    check_hardware(&mut errors, &FieldPath::new("spec"), &spec, memory);
    errors.iter().map(ToString::to_string).collect()
}

fn with(base: Value, patch: Value) -> Value {
    let mut spec = base;
    json_patch::merge(&mut spec, &patch);
    spec
}

#[test]
fn a_class_s_hardware_on_its_own() {
    let none: &[&str] = &[];
    let cases: Vec<(&str, Value, &[&str])> = vec![
        ("the GPU class", gpu_spec(), none),
        (
            "2Mi pages",
            json!({"memory": {"hugepages": {"pageSize": "2Mi"}}}),
            none,
        ),
        (
            "a page size KubeVirt does not know",
            json!({"memory": {"hugepages": {"pageSize": "4Ki"}}}),
            &[
                r#"spec.memory.hugepages.pageSize: Unsupported value: "4Ki": supported values: "1Gi", "2Mi""#,
            ],
        ),
        (
            "memory not a whole number of pages",
            json!({"memory": {"size": "1536Mi"}}),
            &[
                r#"spec.memory.size: Invalid value: "1536Mi": must be a multiple of the hugepage size 1Gi"#,
            ],
        ),
        (
            "a device without its plugin's name, and a name used twice",
            json!({"hostDevices": [{"name": "gpu1"}]}),
            &[
                r#"spec.hostDevices[0].name: Duplicate value: "gpu1""#,
                "spec.hostDevices[0].deviceName: Required value: the device plugin's resource name, e.g. nvidia.com/GA102GL_A10",
            ],
        ),
        (
            "a device name that is no label",
            json!({"gpus": [{"name": "GPU_1", "deviceName": "nvidia.com/x"}]}),
            &[r#"spec.gpus[0].name: Invalid value: "GPU_1": a lowercase RFC 1123 label"#],
        ),
        (
            "a CPU model with a space",
            json!({"cpu": {"model": "Skylake Server"}}),
            &[r#"spec.cpu.model: Invalid value: "Skylake Server": a CPU model name"#],
        ),
        (
            "affinity and a priority class are each Machine's",
            json!({"placement": {"affinity": {}, "priorityClassName": "high"}}),
            &[
                "spec.placement.affinity: Forbidden: a class sets nodeSelector and tolerations only",
                "spec.placement.priorityClassName: Forbidden: a class sets nodeSelector and tolerations only",
            ],
        ),
        (
            "a bad toleration and a bad node label",
            json!({"placement": {"nodeSelector": {"bad key!": "x"},
                                 "tolerations": [{"operator": "Equal", "value": "x"}]}}),
            &[
                r#"spec.placement.nodeSelector: Invalid value: "bad key!""#,
                r#"spec.placement.tolerations[0].operator: Invalid value: "Equal": operator must be Exists"#,
            ],
        ),
        (
            "a listed model twice",
            json!({"limits": {"cpu": {"models": ["host-model", "host-model"]}}}),
            &[r#"spec.limits.cpu.models[1]: Duplicate value: "host-model""#],
        ),
    ];
    for (name, patch, want) in cases {
        let got = class_errors(with(gpu_spec(), patch));
        assert_eq!(got.len(), want.len(), "{name}: {got:#?}");
        for (g, w) in got.iter().zip(want) {
            assert!(g.starts_with(w), "{name}: {g:?} does not start with {w:?}");
        }
    }
}

#[test]
fn too_many_devices_are_refused_without_checking_each() {
    let gpus: Vec<Value> = (0..1000)
        .map(|i| json!({"name": format!("g{i}"), "deviceName": "nvidia.com/x"}))
        .collect();
    let got = class_errors(with(gpu_spec(), json!({"gpus": gpus})));
    assert_eq!(
        got,
        ["spec.gpus: Too many: 1000: must have at most 16 items"]
    );
}
