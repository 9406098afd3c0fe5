//! The CRD's own openAPIV3Schema, applied to raw objects before they are deserialised: a mutating
//! webhook sees an object before the API server's schema check, so wrong types must become field
//! errors here, not serde failures.

use jsonschema::{Draft, Validator, error::ValidationErrorKind};
use serde_json::Value;

use crate::api::crd::machine_openapi_schema;
use crate::machine::{FieldError, FieldPath};

#[derive(Debug, thiserror::Error)]
#[error("the Machine CRD schema does not compile: {0}")]
pub struct SchemaError(String);

/// A compiled structural schema.
pub struct SchemaCheck {
    validator: Validator,
}

impl SchemaCheck {
    pub fn machine() -> Result<Self, SchemaError> {
        Self::from_openapi(&machine_openapi_schema())
    }

    pub fn from_openapi(openapi: &Value) -> Result<Self, SchemaError> {
        let schema = to_json_schema(openapi);
        let validator = jsonschema::options()
            .with_draft(Draft::Draft4)
            .build(&schema)
            .map_err(|e| SchemaError(e.to_string()))?;
        Ok(SchemaCheck { validator })
    }

    /// Every schema violation of `object` (nulls already pruned) as a Kubernetes field error.
    pub fn check(&self, object: &Value) -> Vec<FieldError> {
        // Valid objects are the common case, and `is_valid` stops at the first failure
        // without building error reports.
        if self.validator.is_valid(object) {
            return Vec::new();
        }
        let mut errors: Vec<FieldError> = self
            .validator
            .iter_errors(object)
            .map(|e| {
                let path = field_path(object, e.instance_path().as_str());
                to_field_error(&FieldPath::new(&path), e.instance(), e.kind())
            })
            .collect();
        errors.dedup();
        errors
    }
}

/// OpenAPI v3 (as CRDs use it) to JSON Schema draft 4: `nullable` becomes a "null" type.
fn to_json_schema(openapi: &Value) -> Value {
    match openapi {
        Value::Object(map) => {
            let mut out: serde_json::Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), to_json_schema(v)))
                .collect();
            if out.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                out.insert(
                    "anyOf".into(),
                    serde_json::json!([{"type": "integer"}, {"type": "string"}]),
                );
            }
            if out.remove("nullable") == Some(Value::Bool(true))
                && let Some(Value::String(t)) = out.get("type").cloned()
            {
                out.insert(
                    "type".into(),
                    Value::Array(vec![Value::String(t), "null".into()]),
                );
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(to_json_schema).collect()),
        other => other.clone(),
    }
}

/// A JSON pointer into `root` as a Kubernetes field path (`/spec/disks/1/name` -> `spec.disks[1].name`).
fn field_path(root: &Value, pointer: &str) -> String {
    let mut path = String::new();
    let mut current = Some(root);
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        match current {
            Some(Value::Array(items)) => {
                let i: usize = segment.parse().unwrap_or_default();
                path.push_str(&format!("[{i}]"));
                current = items.get(i);
            }
            other => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&segment);
                current = match other {
                    Some(Value::Object(map)) => map.get(&segment),
                    _ => None,
                };
            }
        }
    }
    path
}

fn to_field_error(path: &FieldPath, instance: &Value, kind: &ValidationErrorKind) -> FieldError {
    match kind {
        ValidationErrorKind::Type { kind } => {
            let expected = format!("{kind:?}").to_lowercase();
            let expected = expected
                .trim_start_matches("single(")
                .trim_start_matches("multiple(")
                .trim_end_matches(')')
                .to_owned();
            FieldError::type_invalid(
                path,
                instance.clone(),
                format!("must be of type {}", describe_type(&expected)),
            )
        }
        ValidationErrorKind::AnyOf { .. } => FieldError::type_invalid(
            path,
            instance.clone(),
            "must be an integer or a string (a quantity such as \"20Gi\")",
        ),
        ValidationErrorKind::Enum { options } => {
            let allowed: Vec<String> = options
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            FieldError::not_supported(path, instance.clone(), &allowed)
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            FieldError::required(&path.child(name), "")
        }
        ValidationErrorKind::Minimum { limit: limit_value } => FieldError::invalid(
            path,
            instance.clone(),
            format!("must be greater than or equal to {}", limit(limit_value)),
        ),
        ValidationErrorKind::Maximum { limit: limit_value } => FieldError::invalid(
            path,
            instance.clone(),
            format!("must be less than or equal to {}", limit(limit_value)),
        ),
        other => FieldError::invalid(
            path,
            instance.clone(),
            format!("violates the schema's {:?} rule", other.keyword()),
        ),
    }
}

/// jsonschema names types like `integer`, or a set like `{string, null}` for nullable ones.
fn describe_type(expected: &str) -> String {
    let names: Vec<&str> = expected
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|s| !s.is_empty() && *s != "null" && *s != "jsontype" && *s != "jsontypeset")
        .collect();
    match names.as_slice() {
        [] => expected.to_owned(),
        [one] => (*one).to_owned(),
        many => many.join(" or "),
    }
}

/// Reads values the way kube-apiserver does for a structural schema: object fields that are null
/// are dropped, and whole-number floats (`4.0`) count as integers.
pub fn prune_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_nulls),
        Value::Number(n) => {
            if let Some(f) = n
                .as_f64()
                .filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15)
            {
                *value = Value::from(f as i64);
            }
        }
        _ => {}
    }
}

/// A schema limit as written in the CRD (`256`, not `256.0`).
fn limit(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("{}", f as i64),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The list bounds are in the CRD schema too, so kube-apiserver enforces them without us.
    #[test]
    fn the_crd_schema_bounds_disks_networks_and_boot_order() {
        let items = |n: usize, f: &dyn Fn(usize) -> Value| (0..n).map(f).collect::<Vec<_>>();
        let disk = |i| json!({"name": format!("d{i}")});
        let nic = |i| json!({"name": format!("eth{i}"), "networkName": "n"});
        let schema = SchemaCheck::machine().expect("schema compiles");
        let at = json!({"spec": {"disks": items(256, &disk), "networks": items(32, &nic),
                                 "bootOrder": ["disk", "network", "cdrom"]}});
        assert_eq!(schema.check(&at), Vec::new());
        let over = json!({"spec": {"disks": items(257, &disk), "networks": items(33, &nic),
                                   "bootOrder": ["disk", "network", "cdrom", "disk"]}});
        let refused: Vec<(String, bool)> = schema
            .check(&over)
            .into_iter()
            .map(|e| (e.field, e.detail.contains("\"maxItems\" rule")))
            .collect();
        let over_max = |field: &str| (field.to_owned(), true);
        assert_eq!(
            refused,
            [
                over_max("spec.bootOrder"),
                over_max("spec.disks"),
                over_max("spec.networks")
            ]
        );
    }
}
