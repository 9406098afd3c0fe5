use serde_json::{Value, json};

use super::*;
use crate::api::MachineClassSpec;

fn xlarge() -> Class {
    let spec: MachineClassSpec = serde_json::from_value(json!({
        "cpu": {"cores": 4},
        "memory": {"size": "48Gi"},
        "disks": [{"name": "root", "size": "100Gi"}],
        "limits": {"cpu": {"maxCores": 16, "maxThreads": 2, "maxSockets": 2},
                   "memory": {"min": "8Gi", "max": "128Gi"},
                   "disks": {"maxCount": 3, "maxSize": "2Ti"}}
    }))
    .expect("spec");
    Class::from_spec("xlarge", &spec).expect("valid class")
}

fn spec(v: Value) -> MachineSpec {
    serde_json::from_value(v).expect("spec")
}

fn check(new: Value, stored: Option<Value>) -> Vec<String> {
    let class = xlarge();
    let bounds = Bounds {
        limits: &class.limits,
        class: "xlarge",
    };
    let stored = stored.map(spec);
    limit_errors(&spec(new), &class, &bounds, stored.as_ref())
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn disks(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"name": format!("d{i}"), "size": "1Gi"}))
        .collect()
}

#[test]
fn overrides_within_and_beyond_the_limits() {
    let none: &[&str] = &[];
    let cases: Vec<(&str, Value, &[&str])> = vec![
        ("the class alone", json!({}), none),
        (
            "at every limit",
            json!({
            "resources": {"cpu": {"cores": 16, "threads": 2, "sockets": 2}, "memory": {"size": "128Gi"}},
            "disks": [{"name": "root", "size": "2Ti"}, {"name": "a", "size": "2Ti"}, {"name": "b", "size": "1Gi"}]}),
            none,
        ),
        (
            "memory at the minimum",
            json!({"resources": {"memory": {"size": "8Gi"}}}),
            none,
        ),
        (
            "cpu over",
            json!({"resources": {"cpu": {"cores": 17, "threads": 4, "sockets": 3}}}),
            &[
                "spec.resources.cpu.cores: Invalid value: 17: must be at most 16: limits.cpu.maxCores of MachineClass \"xlarge\"",
                "spec.resources.cpu.threads: Invalid value: 4: must be at most 2: limits.cpu.maxThreads of MachineClass \"xlarge\"",
                "spec.resources.cpu.sockets: Invalid value: 3: must be at most 2: limits.cpu.maxSockets of MachineClass \"xlarge\"",
            ],
        ),
        (
            "memory over",
            json!({"resources": {"memory": {"size": "129Gi"}}}),
            &[
                "spec.resources.memory.size: Invalid value: \"129Gi\": must be at most 128Gi: limits.memory.max of MachineClass \"xlarge\"",
            ],
        ),
        (
            "memory under",
            json!({"resources": {"memory": {"size": "4Gi"}}}),
            &[
                "spec.resources.memory.size: Invalid value: \"4Gi\": must be at least 8Gi: limits.memory.min of MachineClass \"xlarge\"",
            ],
        ),
        (
            "the class's root counts: 3 added make 4",
            json!({"disks": disks(3)}),
            &[
                "spec.disks: Too many: 4: must have at most 3 disks, the class's included: limits.disks.maxCount of MachineClass \"xlarge\"",
            ],
        ),
        (
            "root overridden is not counted twice",
            json!({"disks": [{"name": "root", "size": "200Gi"}, {"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}]}),
            none,
        ),
        (
            "a disk over the size",
            json!({"disks": [{"name": "data", "size": "3Ti"}, {"name": "root", "size": "2049Gi"}]}),
            &[
                "spec.disks[0].size: Invalid value: \"3Ti\": must be at most 2Ti: limits.disks.maxSize of MachineClass \"xlarge\"",
                "spec.disks[1].size: Invalid value: \"2049Gi\": must be at most 2Ti: limits.disks.maxSize of MachineClass \"xlarge\"",
            ],
        ),
        (
            "a clone without a size takes its source's: not checked",
            json!({"disks": [
            {"name": "os", "source": {"pvc": {"name": "golden", "namespace": "images"}}}]}),
            none,
        ),
    ];
    for (what, new, want) in cases {
        assert_eq!(check(new, None), want, "{what}");
    }
}

/// On UPDATE, what stays as stored is not checked again; what changes is.
#[test]
fn values_left_as_stored_are_not_checked_again() {
    let stored = json!({
        "resources": {"cpu": {"cores": 32, "threads": 1, "sockets": 1}, "memory": {"size": "256Gi"}},
        "disks": [{"name": "root", "size": "4Ti"}, {"name": "d0", "size": "1Gi"},
                  {"name": "d1", "size": "1Gi"}, {"name": "d2", "size": "1Gi"}]
    });
    let none: &[&str] = &[];
    let cases: Vec<(&str, Value, &[&str])> = vec![
        ("unchanged", stored.clone(), none),
        (
            "running flipped",
            {
                let mut s = stored.clone();
                s["running"] = json!(false);
                s
            },
            none,
        ),
        (
            "a disk fewer is still over the count, but not growing",
            {
                let mut s = stored.clone();
                s["disks"].as_array_mut().unwrap().pop();
                s
            },
            none,
        ),
        (
            "cores raised further",
            {
                let mut s = stored.clone();
                s["resources"]["cpu"]["cores"] = json!(33);
                s
            },
            &[
                "spec.resources.cpu.cores: Invalid value: 33: must be at most 16: limits.cpu.maxCores of MachineClass \"xlarge\"",
            ],
        ),
        (
            "cores lowered, still over",
            {
                let mut s = stored.clone();
                s["resources"]["cpu"]["cores"] = json!(20);
                s
            },
            &[
                "spec.resources.cpu.cores: Invalid value: 20: must be at most 16: limits.cpu.maxCores of MachineClass \"xlarge\"",
            ],
        ),
        (
            "memory in another spelling of the same amount",
            {
                let mut s = stored.clone();
                s["resources"]["memory"]["size"] = json!("262144Mi");
                s
            },
            none,
        ),
        (
            "root grown",
            {
                let mut s = stored.clone();
                s["disks"][0]["size"] = json!("5Ti");
                s
            },
            &[
                "spec.disks[0].size: Invalid value: \"5Ti\": must be at most 2Ti: limits.disks.maxSize of MachineClass \"xlarge\"",
            ],
        ),
        (
            "a disk added",
            {
                let mut s = stored.clone();
                s["disks"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "d3", "size": "1Gi"}));
                s
            },
            &[
                "spec.disks: Too many: 5: must have at most 3 disks, the class's included: limits.disks.maxCount of MachineClass \"xlarge\"",
            ],
        ),
    ];
    for (what, new, want) in cases {
        assert_eq!(check(new, Some(stored.clone())), want, "{what}");
    }
}

#[test]
fn a_class_without_limits_bounds_nothing() {
    let class = Class::from_spec(
        "plain",
        &serde_json::from_value(json!({"cpu": {"cores": 1}, "memory": {"size": "1Gi"}})).unwrap(),
    )
    .unwrap();
    assert!(class.limits.is_empty());
    let bounds = Bounds {
        limits: &class.limits,
        class: "plain",
    };
    let big = spec(json!({"resources": {"cpu": {"cores": 256}}, "disks": disks(256)}));
    assert!(limit_errors(&big, &class, &bounds, None).is_empty());
}
