use serde_json::{Value, json};

use super::*;

fn errors(spec: Value) -> Vec<String> {
    let spec: MachineClassSpec = serde_json::from_value(spec).expect("spec");
    check_class(&spec).iter().map(ToString::to_string).collect()
}

/// The example, with its limits.
fn xlarge() -> Value {
    json!({
        "displayName": "Extra large", "description": "Production databases",
        "default": false, "enabled": true,
        "cpu": {"cores": 4, "threads": 1, "sockets": 1},
        "memory": {"size": "48Gi"},
        "disks": [{"name": "root", "size": "100Gi", "storageClass": "fast-ssd"}],
        "limits": {"cpu": {"maxCores": 16, "maxSockets": 2},
                   "memory": {"min": "8Gi", "max": "128Gi"},
                   "disks": {"maxCount": 8, "maxSize": "2Ti"}}
    })
}

fn with(patch: Value) -> Value {
    let mut spec = xlarge();
    json_patch::merge(&mut spec, &patch);
    spec
}

#[test]
fn every_rule_of_a_class_on_its_own() {
    let none: &[&str] = &[];
    let cases: Vec<(&str, Value, &[&str])> = vec![
        ("the issue's example", xlarge(), none),
        (
            "only cores and memory",
            json!({"cpu": {"cores": 1}, "memory": {"size": "64Mi"}}),
            none,
        ),
        (
            "nothing",
            json!({}),
            &[
                "spec.cpu.cores: Required value: every class sets its cores",
                "spec.memory.size: Required value: every class sets its memory",
            ],
        ),
        (
            "cpu out of range",
            with(json!({"cpu": {"cores": 0, "threads": 9, "sockets": 17},
                                         "limits": null})),
            &[
                "spec.cpu.cores: Invalid value: 0: must be between 1 and 256, inclusive",
                "spec.cpu.threads: Invalid value: 9: must be between 1 and 8, inclusive",
                "spec.cpu.sockets: Invalid value: 17: must be between 1 and 16, inclusive",
            ],
        ),
        (
            "hot-plug maxima, a Machine's own choice",
            with(json!({"cpu": {"maxSockets": 2}, "memory": {"maxSize": "64Gi"}})),
            &[
                "spec.cpu.maxSockets: Forbidden: a class sets no hot-plug maximum: each Machine sets its own (spec.resources.cpu.maxSockets)",
                "spec.memory.maxSize: Forbidden: a class sets no hot-plug maximum: each Machine sets its own (spec.resources.memory.maxSize)",
            ],
        ),
        (
            "memory too small",
            with(json!({"memory": {"size": "32Mi"}, "limits": null})),
            &["spec.memory.size: Invalid value: \"32Mi\": must be at least 64Mi"],
        ),
        (
            "memory not a quantity",
            with(json!({"memory": {"size": "lots"}, "limits": null})),
            &[
                "spec.memory.size: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ],
        ),
        (
            "a disabled default",
            with(json!({"default": true, "enabled": false})),
            &[
                "spec.default: Invalid value: true: a disabled class cannot be the default (spec.enabled is false)",
            ],
        ),
        (
            "display name too long",
            with(json!({"displayName": "x".repeat(64)})),
            &["spec.displayName: Too long: may not be more than 63 bytes"],
        ),
        (
            "description too long",
            with(json!({"description": "x".repeat(1025)})),
            &["spec.description: Too long: may not be more than 1024 bytes"],
        ),
        (
            "disks",
            with(json!({"limits": null, "disks": [
            {"name": "root", "size": "100Gi"}, {"name": "root", "size": "0"},
            {"name": "cloudinitdisk", "size": "1Gi"}, {"name": "Data"},
            {"size": "1Gi", "storageClass": "Fast_SSD"}]})),
            &[
                "spec.disks[1].name: Duplicate value: \"root\"",
                "spec.disks[1].size: Invalid value: \"0\": must be at least 1Mi",
                "spec.disks[2].name: Invalid value: \"cloudinitdisk\": is reserved for the cloud-init volume",
                "spec.disks[3].name: Invalid value: \"Data\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.disks[3].size: Required value: a class's disks have a size",
                "spec.disks[4].name: Required value",
                "spec.disks[4].storageClass: Invalid value: \"Fast_SSD\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
        (
            "too many disks",
            with(json!({"limits": null, "disks":
            (0..17).map(|i| json!({"name": format!("d{i}"), "size": "1Gi"})).collect::<Vec<_>>()})),
            &["spec.disks: Too many: 17: must have at most 16 items"],
        ),
        (
            "limits below the class's own values",
            with(json!({"cpu": {"cores": 4, "threads": 2, "sockets": 2},
            "limits": {"cpu": {"maxCores": 2, "maxThreads": 1, "maxSockets": 1},
                       "memory": {"min": "64Gi", "max": "32Gi"},
                       "disks": {"maxCount": 0, "maxSize": "50Gi"}}})),
            &[
                "spec.limits.cpu.maxCores: Invalid value: 2: must be at least the class's own spec.cpu.cores (4)",
                "spec.limits.cpu.maxThreads: Invalid value: 1: must be at least the class's own spec.cpu.threads (2)",
                "spec.limits.cpu.maxSockets: Invalid value: 1: must be at least the class's own spec.cpu.sockets (2)",
                "spec.limits.memory.min: Invalid value: \"64Gi\": must not be more than 32Gi (spec.limits.memory.max)",
                "spec.limits.memory.min: Invalid value: \"64Gi\": must not be more than the class's own spec.memory.size (48Gi)",
                "spec.limits.memory.max: Invalid value: \"32Gi\": must be at least the class's own spec.memory.size (48Gi)",
                "spec.limits.disks.maxCount: Invalid value: 0: must be between 1 and 256, inclusive",
                "spec.limits.disks.maxCount: Invalid value: 0: must be at least the number of the class's own disks (1)",
                "spec.limits.disks.maxSize: Invalid value: \"50Gi\": must be at least the size of the class's own disk \"root\"",
            ],
        ),
        (
            "limits out of range",
            with(
                json!({"limits": {"cpu": {"maxCores": 300, "maxThreads": 9, "maxSockets": 17},
            "memory": {"min": "1Mi", "max": "x"}, "disks": {"maxCount": 257, "maxSize": "0"}}}),
            ),
            &[
                "spec.limits.cpu.maxCores: Invalid value: 300: must be between 1 and 256, inclusive",
                "spec.limits.cpu.maxThreads: Invalid value: 9: must be between 1 and 8, inclusive",
                "spec.limits.cpu.maxSockets: Invalid value: 17: must be between 1 and 16, inclusive",
                "spec.limits.memory.min: Invalid value: \"1Mi\": must be at least 64Mi",
                "spec.limits.memory.max: Invalid value: \"x\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.limits.disks.maxCount: Invalid value: 257: must be between 1 and 256, inclusive",
                "spec.limits.disks.maxSize: Invalid value: \"0\": must be greater than zero",
            ],
        ),
        (
            "limits equal to the class's own values",
            with(json!({
            "limits": {"cpu": {"maxCores": 4, "maxThreads": 1, "maxSockets": 1},
                       "memory": {"min": "48Gi", "max": "48Gi"},
                       "disks": {"maxCount": 1, "maxSize": "100Gi"}}})),
            none,
        ),
    ];
    for (what, spec, want) in cases {
        assert_eq!(errors(spec), want, "{what}");
    }
}
