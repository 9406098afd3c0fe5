//! `spec.evictionStrategy` and `spec.placement`, checked with Kubernetes' own rules for the
//! fields they copy (label syntax, selector operators, taint effects), so a bad one is refused
//! naming the field instead of the VM failing later; and the warning for a strategy KubeVirt
//! cannot honour.

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::api::MachineSpec;
use crate::api::placement::{EVICTION_LIVE_MIGRATE, EVICTION_STRATEGIES, Placement};

use super::super::field_error::{FieldError, FieldPath};
use super::super::names::{dns1123_subdomain, label_value, qualified_name};
use super::super::scheduling::{node_selector_errors, tolerations_errors};
use super::{Outcome, bounded, check_enum, push_all};

/// Terms, expressions and values per selector: far above real use, bounding the work.
const MAX_TERMS: usize = 32;
const MAX_VALUES: usize = 64;

const NODE_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const LABEL_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

pub fn validate(out: &mut Outcome, spec_path: &FieldPath, spec: &MachineSpec) {
    let strategy = spec.eviction_strategy.as_deref();
    check_enum(
        out,
        &spec_path.child("evictionStrategy"),
        strategy,
        EVICTION_STRATEGIES,
    );
    if strategy == Some(EVICTION_LIVE_MIGRATE) {
        for d in spec
            .disks
            .iter()
            .filter(|d| d.access_mode.as_deref() == Some("ReadWriteOnce"))
        {
            out.warnings.push(format!(
                "spec.evictionStrategy: LiveMigrate needs every disk shared, and disk {:?} is \
                 ReadWriteOnce: KubeVirt will refuse to migrate the VM, so a node drain waits \
                 for it (use ReadWriteMany, or LiveMigrateIfPossible)",
                d.name
            ));
        }
    }
    if let Some(p) = &spec.placement {
        placement(out, &spec_path.child("placement"), p);
    }
}

fn placement(out: &mut Outcome, path: &FieldPath, p: &Placement) {
    let selector = path.child("nodeSelector");
    out.errors
        .extend(node_selector_errors(&selector, &p.node_selector));
    let tolerations = path.child("tolerations");
    out.errors
        .extend(tolerations_errors(&tolerations, &p.tolerations));
    if let Some(a) = &p.affinity {
        affinity(out, &path.child("affinity"), a);
    }
    if let Some(name) = &p.priority_class_name {
        let path = path.child("priorityClassName");
        push_all(out, &path, name, dns1123_subdomain(name));
    }
}

fn affinity(out: &mut Outcome, path: &FieldPath, a: &Affinity) {
    if let Some(node) = &a.node_affinity {
        let path = path.child("nodeAffinity");
        if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
            let path = path.child("requiredDuringSchedulingIgnoredDuringExecution");
            let terms = path.child("nodeSelectorTerms");
            let list = bounded(out, &terms, &required.node_selector_terms, MAX_TERMS);
            if list.is_empty() {
                out.errors.push(FieldError::required(
                    &terms,
                    "must have at least one node selector term",
                ));
            }
            for (i, term) in list.iter().enumerate() {
                node_term(out, &terms.index(i), term);
            }
        }
        let preferred = path.child("preferredDuringSchedulingIgnoredDuringExecution");
        let list = node
            .preferred_during_scheduling_ignored_during_execution
            .as_deref()
            .unwrap_or_default();
        for (i, p) in bounded(out, &preferred, list, MAX_TERMS).iter().enumerate() {
            let path = preferred.index(i);
            weight(out, &path, p.weight);
            node_term(out, &path.child("preference"), &p.preference);
        }
    }
    for (name, pod) in [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ] {
        let Some((required, preferred)) = pod else {
            continue;
        };
        let path = path.child(name);
        let req_path = path.child("requiredDuringSchedulingIgnoredDuringExecution");
        let list = required.as_deref().unwrap_or_default();
        for (i, term) in bounded(out, &req_path, list, MAX_TERMS).iter().enumerate() {
            pod_term(out, &req_path.index(i), term);
        }
        let pref_path = path.child("preferredDuringSchedulingIgnoredDuringExecution");
        let list = preferred.as_deref().unwrap_or_default();
        for (i, p) in bounded(out, &pref_path, list, MAX_TERMS).iter().enumerate() {
            let path = pref_path.index(i);
            weight(out, &path, p.weight);
            pod_term(out, &path.child("podAffinityTerm"), &p.pod_affinity_term);
        }
    }
}

fn weight(out: &mut Outcome, path: &FieldPath, weight: i32) {
    if !(1..=100).contains(&weight) {
        out.errors.push(FieldError::invalid(
            &path.child("weight"),
            weight,
            "must be in the range 1-100",
        ));
    }
}

fn node_term(out: &mut Outcome, path: &FieldPath, term: &NodeSelectorTerm) {
    let exprs = path.child("matchExpressions");
    let list = term.match_expressions.as_deref().unwrap_or_default();
    for (i, e) in bounded(out, &exprs, list, MAX_TERMS).iter().enumerate() {
        requirement(out, &exprs.index(i), e, NODE_OPERATORS);
    }
    let fields = path.child("matchFields");
    let list = term.match_fields.as_deref().unwrap_or_default();
    for (i, e) in bounded(out, &fields, list, MAX_TERMS).iter().enumerate() {
        let path = fields.index(i);
        if e.key != "metadata.name" {
            out.errors.push(FieldError::not_supported(
                &path.child("key"),
                e.key.as_str(),
                &["metadata.name"],
            ));
        }
        requirement(out, &path, e, &["In", "NotIn"]);
    }
}

/// A node selector requirement: the key a qualified name, the operator known, and the values
/// each operator needs (In/NotIn some, Exists/DoesNotExist none, Gt/Lt one integer).
fn requirement(out: &mut Outcome, path: &FieldPath, e: &NodeSelectorRequirement, ops: &[&str]) {
    if e.key != "metadata.name" {
        push_all(out, &path.child("key"), &e.key, qualified_name(&e.key));
    }
    let values = e.values.as_deref().unwrap_or_default();
    selector_values(out, path, &e.operator, values, ops);
}

fn selector_values(out: &mut Outcome, path: &FieldPath, op: &str, values: &[String], ops: &[&str]) {
    check_enum(out, &path.child("operator"), Some(op), ops);
    let values_path = path.child("values");
    let values = bounded(out, &values_path, values, MAX_VALUES);
    let wrong = match op {
        "In" | "NotIn" if values.is_empty() => {
            Some("must be specified when `operator` is 'In' or 'NotIn'")
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            Some("may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        }
        "Gt" | "Lt" if values.len() != 1 || values[0].parse::<i64>().is_err() => {
            Some("must be specified single integer value when `operator` is 'Lt' or 'Gt'")
        }
        _ => None,
    };
    if let Some(detail) = wrong {
        out.errors.push(FieldError::required(&values_path, detail));
    }
    for (i, v) in values.iter().enumerate() {
        push_all(out, &values_path.index(i), v, label_value(v));
    }
}

fn pod_term(out: &mut Outcome, path: &FieldPath, term: &PodAffinityTerm) {
    let topology = path.child("topologyKey");
    if term.topology_key.is_empty() {
        out.errors
            .push(FieldError::required(&topology, "can not be empty"));
    } else {
        push_all(
            out,
            &topology,
            &term.topology_key,
            qualified_name(&term.topology_key),
        );
    }
    if let Some(selector) = &term.label_selector {
        label_selector(out, &path.child("labelSelector"), selector);
    }
}

fn label_selector(out: &mut Outcome, path: &FieldPath, s: &LabelSelector) {
    let labels = path.child("matchLabels");
    for (key, value) in s.match_labels.iter().flatten().take(MAX_VALUES) {
        push_all(out, &labels, key, qualified_name(key));
        push_all(out, &labels.child(key), value, label_value(value));
    }
    let exprs = path.child("matchExpressions");
    let list = s.match_expressions.as_deref().unwrap_or_default();
    for (i, e) in bounded(out, &exprs, list, MAX_TERMS).iter().enumerate() {
        let path = exprs.index(i);
        push_all(out, &path.child("key"), &e.key, qualified_name(&e.key));
        let values = e.values.as_deref().unwrap_or_default();
        selector_values(out, &path, &e.operator, values, LABEL_OPERATORS);
    }
}

#[cfg(test)]
mod tests;
