//! The JSON Patch operations the mutating webhook adds besides the spec: annotations, the
//! finalizer.

use serde_json::Value;

use crate::machine::FINALIZER;

/// The JSON Patch operation that sets one annotation, creating the map (or metadata) as needed;
/// none when it already holds that value.
pub fn annotation_op(
    object: &Value,
    key: &str,
    value: String,
) -> Option<json_patch::PatchOperation> {
    use json_patch::{AddOperation, PatchOperation, jsonptr::PointerBuf};
    let metadata = object.get("metadata").filter(|m| m.is_object());
    let annotations = metadata
        .and_then(|m| m.get("annotations"))
        .filter(|a| a.is_object());
    let (path, value) = match (metadata, annotations) {
        (_, Some(a)) if a.get(key).and_then(Value::as_str) == Some(value.as_str()) => return None,
        (_, Some(_)) => (
            PointerBuf::from_tokens(["metadata", "annotations", key]),
            Value::String(value),
        ),
        (Some(_), None) => (
            PointerBuf::from_tokens(["metadata", "annotations"]),
            serde_json::json!({ key: value }),
        ),
        (None, None) => (
            PointerBuf::from_tokens(["metadata"]),
            serde_json::json!({ "annotations": { key: value } }),
        ),
    };
    Some(PatchOperation::Add(AddOperation { path, value }))
}

/// The JSON Patch operations that set `pairs` as annotations: one per annotation that differs
/// when the map exists, else one that makes the map (or metadata) with all of them.
pub fn annotations_op(
    object: &Value,
    pairs: Vec<(&str, String)>,
) -> Vec<json_patch::PatchOperation> {
    use json_patch::{AddOperation, PatchOperation, jsonptr::PointerBuf};
    let metadata = object.get("metadata").filter(|m| m.is_object());
    let annotations = metadata
        .and_then(|m| m.get("annotations"))
        .filter(|a| a.is_object());
    if annotations.is_some() {
        return pairs
            .into_iter()
            .filter_map(|(key, value)| annotation_op(object, key, value))
            .collect();
    }
    let map: serde_json::Map<String, Value> = pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Value::String(v)))
        .collect();
    let (path, value) = match metadata {
        Some(_) => (
            PointerBuf::from_tokens(["metadata", "annotations"]),
            Value::Object(map),
        ),
        None => (
            PointerBuf::from_tokens(["metadata"]),
            serde_json::json!({ "annotations": map }),
        ),
    };
    vec![PatchOperation::Add(AddOperation { path, value })]
}

/// The JSON Patch operation that appends [`FINALIZER`] to `metadata.finalizers` (creating the
/// list as needed); none when it is already there, or when the object is being deleted. Expects
/// `metadata` to exist by the time it applies (see [`annotation_op`]).
pub fn finalizer_op(object: &Value) -> Option<json_patch::PatchOperation> {
    use json_patch::{AddOperation, PatchOperation, jsonptr::PointerBuf};
    let metadata = object.get("metadata");
    if metadata
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null())
    {
        return None;
    }
    let (path, value) = match metadata
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
    {
        Some(list) if list.iter().any(|f| f.as_str() == Some(FINALIZER)) => return None,
        Some(_) => (
            PointerBuf::from_tokens(["metadata", "finalizers", "-"]),
            Value::String(FINALIZER.to_owned()),
        ),
        None => (
            PointerBuf::from_tokens(["metadata", "finalizers"]),
            serde_json::json!([FINALIZER]),
        ),
    };
    Some(PatchOperation::Add(AddOperation { path, value }))
}
