use serde_json::{Value, json};

use crate::api::MachineSpec;
use crate::machine::field_error::FieldPath;

use super::super::Outcome;

fn check(spec: Value) -> Outcome {
    let spec: MachineSpec = serde_json::from_value(spec).expect("spec");
    let mut out = Outcome::default();
    super::validate(&mut out, &FieldPath::new("spec"), &spec);
    out
}

fn fields(spec: Value) -> Vec<String> {
    check(spec).errors.iter().map(|e| e.field.clone()).collect()
}

#[test]
fn valid_placement_passes() {
    let out = check(json!({
        "evictionStrategy": "LiveMigrateIfPossible",
        "placement": {
            "nodeSelector": {"node-role.kubernetes.io/worker": "", "zone": "a"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "vms", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}],
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["8"]},
                                          {"key": "gpu", "operator": "DoesNotExist"}]}]},
                  "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "preference": {"matchExpressions": [{"key": "ssd", "operator": "In", "values": ["yes"]}]}}]},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                      "labelSelector": {"matchLabels": {"app": "db"}}}}]}},
            "priorityClassName": "vm-high"
        }
    }));
    assert_eq!(out, Outcome::default());
}

#[test]
fn each_bad_field_is_named() {
    let cases = [
        (
            json!({"evictionStrategy": "Migrate"}),
            "spec.evictionStrategy",
        ),
        (
            json!({"placement": {"nodeSelector": {"bad key!": "x"}}}),
            "spec.placement.nodeSelector",
        ),
        (
            json!({"placement": {"nodeSelector": {"zone": "a b"}}}),
            "spec.placement.nodeSelector.zone",
        ),
        (
            json!({"placement": {"tolerations": [{"key": "k", "operator": "Maybe"}]}}),
            "spec.placement.tolerations[0].operator",
        ),
        (
            json!({"placement": {"tolerations": [{"key": "k", "effect": "NoRun"}]}}),
            "spec.placement.tolerations[0].effect",
        ),
        (
            json!({"placement": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}}),
            "spec.placement.tolerations[0].value",
        ),
        (
            json!({"placement": {"tolerations": [{"value": "v"}]}}),
            "spec.placement.tolerations[0].operator",
        ),
        (
            json!({"placement": {"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]}}),
            "spec.placement.tolerations[0].effect",
        ),
        (
            json!({"placement": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cpu", "operator": "Near", "values": ["1"]}]}]}}}}}),
            "spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator",
        ),
        (
            json!({"placement": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cpu", "operator": "In"}]}]}}}}}),
            "spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
        ),
        (
            json!({"placement": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["many"]}]}]}}}}}),
            "spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
        ),
        (
            json!({"placement": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 0, "preference": {}}]}}}}),
            "spec.placement.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        ),
        (
            json!({"placement": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": ""}]}}}}),
            "spec.placement.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        ),
        (
            json!({"placement": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}}]}}}}),
            "spec.placement.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator",
        ),
        (
            json!({"placement": {"priorityClassName": "High_Prio"}}),
            "spec.placement.priorityClassName",
        ),
    ];
    for (spec, field) in cases {
        let got = fields(spec.clone());
        assert!(got.iter().any(|f| f == field), "{spec}: {got:?}");
    }
}

#[test]
fn live_migrate_with_a_read_write_once_disk_is_admitted_with_a_warning_naming_it() {
    let out = check(json!({"evictionStrategy": "LiveMigrate", "disks": [
        {"name": "root", "size": "10Gi", "accessMode": "ReadWriteOnce"},
        {"name": "data", "size": "10Gi", "accessMode": "ReadWriteMany", "volumeMode": "Block"}]}));
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
    assert!(
        out.warnings[0].contains(r#"disk "root" is ReadWriteOnce"#),
        "{}",
        out.warnings[0]
    );
    let quiet = check(
        json!({"evictionStrategy": "LiveMigrateIfPossible", "disks": [
        {"name": "root", "size": "10Gi", "accessMode": "ReadWriteOnce"}]}),
    );
    assert!(quiet.warnings.is_empty());
}

#[test]
fn the_work_is_bounded_whatever_the_input() {
    let tolerations: Vec<Value> = (0..10_000).map(|_| json!({"operator": "Exists"})).collect();
    let out = check(json!({"placement": {"tolerations": tolerations}}));
    assert_eq!(
        out.errors.len(),
        1,
        "one too-many error, the rest unvisited"
    );
    assert_eq!(out.errors[0].field, "spec.placement.tolerations");
}
