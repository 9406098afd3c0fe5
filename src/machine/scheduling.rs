//! Kubernetes' own rules for a node selector and a toleration, shared by a Machine's placement
//! (`validation::placement`) and a class's (`classes::hardware`), so both refuse the same values
//! naming the field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;

use crate::api::placement::{MAX_NODE_SELECTOR, MAX_TOLERATIONS};

use super::field_error::{FieldError, FieldPath};
use super::names::{label_value, qualified_name};

const TOLERATION_OPERATORS: &[&str] = &["Exists", "Equal"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn push_all(errors: &mut Vec<FieldError>, path: &FieldPath, value: &str, messages: Vec<String>) {
    errors.extend(
        messages
            .into_iter()
            .map(|m| FieldError::invalid(path, value, m)),
    );
}

fn check_enum(
    errors: &mut Vec<FieldError>,
    path: &FieldPath,
    value: Option<&str>,
    allowed: &[&str],
) {
    if let Some(v) = value
        && !allowed.contains(&v)
    {
        errors.push(FieldError::not_supported(path, v, allowed));
    }
}

/// Label syntax of every key and value, and the count (the first `MAX_NODE_SELECTOR` checked).
pub fn node_selector_errors(
    path: &FieldPath,
    selector: &BTreeMap<String, String>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if selector.len() > MAX_NODE_SELECTOR {
        errors.push(FieldError::too_many(
            path,
            selector.len(),
            MAX_NODE_SELECTOR,
        ));
    }
    for (key, value) in selector.iter().take(MAX_NODE_SELECTOR) {
        push_all(&mut errors, path, key, qualified_name(key));
        push_all(&mut errors, &path.child(key), value, label_value(value));
    }
    errors
}

/// Every toleration's rules, and the count (the first `MAX_TOLERATIONS` checked).
pub fn tolerations_errors(path: &FieldPath, tolerations: &[Toleration]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if tolerations.len() > MAX_TOLERATIONS {
        errors.push(FieldError::too_many(
            path,
            tolerations.len(),
            MAX_TOLERATIONS,
        ));
    }
    for (i, t) in tolerations.iter().take(MAX_TOLERATIONS).enumerate() {
        toleration(&mut errors, &path.index(i), t);
    }
    errors
}

fn toleration(errors: &mut Vec<FieldError>, path: &FieldPath, t: &Toleration) {
    let key = t.key.as_deref().unwrap_or_default();
    let operator = t.operator.as_deref().unwrap_or("Equal");
    if !key.is_empty() {
        push_all(errors, &path.child("key"), key, qualified_name(key));
    } else if operator != "Exists" {
        errors.push(FieldError::invalid(
            &path.child("operator"),
            operator,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    check_enum(
        errors,
        &path.child("operator"),
        t.operator.as_deref(),
        TOLERATION_OPERATORS,
    );
    let value = t.value.as_deref().unwrap_or_default();
    if operator == "Exists" && !value.is_empty() {
        errors.push(FieldError::invalid(
            &path.child("value"),
            value,
            "value must be empty when `operator` is 'Exists'",
        ));
    } else {
        push_all(errors, &path.child("value"), value, label_value(value));
    }
    let effect = t.effect.as_deref().filter(|e| !e.is_empty());
    check_enum(errors, &path.child("effect"), effect, TAINT_EFFECTS);
    if t.toleration_seconds.is_some() && effect != Some("NoExecute") {
        errors.push(FieldError::invalid(
            &path.child("effect"),
            effect.unwrap_or_default(),
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
}
