//! A KubevirtConfig's `spec.namespaceSelector` (pure, table-tested in
//! `namespace_selector/tests.rs`): which namespaces' Machines may be placed on its cluster.
//! Read by the validating webhook at CREATE and by the reconciler for every Machine it would
//! work on there, so both judge a namespace by the same rule.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects a namespace labelled `labels`: no selector selects every
/// namespace, an empty one too (Kubernetes' meaning); an operator it does not know selects
/// none (fail closed).
pub fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let labelled = (selector.match_labels.iter().flatten()).all(|(k, v)| labels.get(k) == Some(v));
    labelled
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => !value.is_some_and(|v| values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests;
