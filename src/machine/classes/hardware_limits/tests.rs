use serde_json::{Value, json};

use super::*;
use crate::api::MachineClassSpec;

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

fn with(base: Value, patch: Value) -> Value {
    let mut spec = base;
    json_patch::merge(&mut spec, &patch);
    spec
}

fn class(patch: Value) -> Class {
    let spec: MachineClassSpec = serde_json::from_value(with(gpu_spec(), patch)).expect("spec");
    Class::from_spec("gpu", &spec).expect("valid class")
}

fn machine_errors(class: &Class, new: Value, stored: Option<Value>) -> Vec<String> {
    let spec: MachineSpec = serde_json::from_value(new).expect("spec");
    let stored: Option<MachineSpec> = stored.map(|s| serde_json::from_value(s).expect("stored"));
    hardware_errors(&spec, class, &class.limits, stored.as_ref())
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn what_a_machine_of_the_class_may_ask_for() {
    let gpu = class(json!({}));
    let open = class(json!({"limits": {"cpu": {"allowDedicated": true}}}));
    let plain = class(json!({"cpu": {"dedicated": null, "model": null}, "limits": null}));
    let none: &[&str] = &[];
    // (case, class, the Machine's spec, as stored, the errors' beginnings)
    type Case<'a> = (&'a str, &'a Class, Value, Option<Value>, &'a [&'a str]);
    let cases: Vec<Case> = vec![
        ("nothing of its own", &gpu, json!({}), None, none),
        (
            "devices of its own",
            &gpu,
            json!({"gpus": [{"name": "g", "deviceName": "nvidia.com/x"}],
                   "hostDevices": [{"name": "h", "deviceName": "intel.com/qat"}]}),
            None,
            &[
                "spec.gpus: Forbidden: a Machine cannot ask for devices: they come from its MachineClass",
                "spec.hostDevices: Forbidden: a Machine cannot ask for devices",
            ],
        ),
        (
            "the class's own values",
            &gpu,
            json!({"resources": {"cpu": {"dedicated": true, "model": "Skylake-Server"}}}),
            None,
            none,
        ),
        (
            "a listed model",
            &gpu,
            json!({"resources": {"cpu": {"model": "host-passthrough"}}}),
            None,
            none,
        ),
        (
            "shared CPUs on a dedicated class",
            &gpu,
            json!({"resources": {"cpu": {"dedicated": false}}}),
            None,
            &[
                r#"spec.resources.cpu.dedicated: Forbidden: the class's value (true) stands: a Machine sets its own only where limits.cpu.allowDedicated of MachineClass "gpu" is true"#,
            ],
        ),
        (
            "where the class allows it",
            &open,
            json!({"resources": {"cpu": {"dedicated": false}}}),
            None,
            none,
        ),
        (
            "dedicated CPUs on a class without any",
            &plain,
            json!({"resources": {"cpu": {"dedicated": true}}}),
            None,
            &[r#"spec.resources.cpu.dedicated: Forbidden: the class's value (false) stands"#],
        ),
        (
            "kept from before the class's limits said so",
            &plain,
            json!({"resources": {"cpu": {"dedicated": true, "model": "host-model"}}}),
            Some(json!({"resources": {"cpu": {"dedicated": true, "model": "host-model"}}})),
            none,
        ),
        (
            "a model the class does not list",
            &gpu,
            json!({"resources": {"cpu": {"model": "host-model"}}}),
            None,
            &[
                r#"spec.resources.cpu.model: Unsupported value: "host-model": supported values: "Skylake-Server", "host-passthrough": a Machine names only its class's own CPU model or one of limits.cpu.models of MachineClass "gpu""#,
            ],
        ),
        (
            "any model on a class with none",
            &plain,
            json!({"resources": {"cpu": {"model": "host-model"}}}),
            None,
            &[
                r#"spec.resources.cpu.model: Forbidden: MachineClass "gpu" sets no CPU model and allows none"#,
            ],
        ),
        (
            "hugepages of its own",
            &plain,
            json!({"resources": {"memory": {"hugepages": {"pageSize": "2Mi"}}}}),
            None,
            &[
                r#"spec.resources.memory.hugepages: Forbidden: hugepages come from the MachineClass"#,
            ],
        ),
        (
            "memory that is not whole pages",
            &gpu,
            json!({"resources": {"memory": {"size": "17000Mi"}}}),
            None,
            &[
                r#"spec.resources.memory.size: Invalid value: "17000Mi": must be a multiple of the hugepage size 1Gi: MachineClass "gpu" backs memory with hugepages"#,
            ],
        ),
        (
            "the class's node label, and one of its own",
            &gpu,
            json!({"placement": {"nodeSelector": {"gpu": "a10", "zone": "b"}}}),
            None,
            none,
        ),
        (
            "another value of the class's node label",
            &gpu,
            json!({"placement": {"nodeSelector": {"gpu": "none"}}}),
            None,
            &[
                r#"spec.placement.nodeSelector.gpu: Forbidden: MachineClass "gpu" sets it to "a10": a Machine runs on its class's nodes"#,
            ],
        ),
    ];
    for (name, class, new, stored, want) in cases {
        let got = machine_errors(class, new, stored);
        assert_eq!(got.len(), want.len(), "{name}: {got:#?}");
        for (g, w) in got.iter().zip(want) {
            assert!(g.starts_with(w), "{name}: {g:?} does not start with {w:?}");
        }
    }
}

/// What a Machine records of its class carries the hardware, so it outlives the class.
#[test]
fn the_record_carries_the_hardware() {
    let gpu = class(json!({}));
    let back = Class::from_record(&gpu.record).expect("record reads");
    assert_eq!(back.hardware, gpu.hardware);
    assert_eq!(back.hardware.gpus.len(), 1);
    assert!(back.hardware.dedicated);
    assert_eq!(back.hardware.page_size.as_deref(), Some("1Gi"));
    assert_eq!(back.limits.models, ["host-passthrough"]);
}
