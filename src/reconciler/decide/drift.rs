//! Deciding whether to write: an object is applied only when it is missing, when what we want
//! changed since we last applied it, or when someone edited a field we own (drift).
//!
//! "What we want changed" is a hash of the desired object kept in an annotation; it catches
//! fields we stopped setting, which a comparison against the live object cannot see. Drift is a
//! comparison of the desired object against the live one, field by field, ignoring fields only
//! others set. Converged Machines therefore cost no API writes at all on resync.

use serde::Serialize;
use serde_json::Value;

use crate::api::Quantity;

use crate::reconciler::APPLIED_HASH_ANNOTATION;

/// Keys whose string values are Kubernetes quantities: the API server may rewrite them in
/// canonical form (`1.5Gi` becomes `1536Mi`), so they compare by amount.
const QUANTITY_KEYS: &[&str] = &["storage", "guest"];
/// Lists merged by key on the server, where others may add entries of their own.
const KEYED_LISTS: &[&str] = &["ownerReferences"];

/// Records the hash of `obj` (its annotations excluded) in its annotations.
pub fn stamp<K: kube::Resource + Serialize>(obj: &mut K) {
    let hash = hash_of(obj);
    obj.meta_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert(APPLIED_HASH_ANNOTATION.to_owned(), hash);
}

/// The hash [`stamp`] records for `obj` (what it holds, its annotations excluded).
pub fn hash_of<K: kube::Resource + Serialize>(obj: &K) -> String {
    let mut value = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("annotations");
    }
    format!("{:016x}", fnv1a(value.to_string().as_bytes()))
}

/// FNV-1a, 64 bit: stable across Rust versions, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether `desired` (stamped) must be applied over `live`.
pub fn needs_apply<K: kube::Resource + Serialize>(desired: &K, live: Option<&K>) -> bool {
    let Some(live) = live else { return true };
    let hash = |k: &K| {
        k.meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(APPLIED_HASH_ANNOTATION))
            .cloned()
    };
    if hash(desired) != hash(live) {
        return true;
    }
    match (serde_json::to_value(desired), serde_json::to_value(live)) {
        (Ok(want), Ok(have)) => !is_subset(&want, &have, None),
        _ => true,
    }
}

/// Whether every field of `want` is in `have` with the same value. Lists must match entry for
/// entry (KubeVirt's and most core lists are atomic), except keyed lists, where each wanted
/// entry must be present.
pub fn is_subset(want: &Value, have: &Value, key: Option<&str>) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w
            .iter()
            .all(|(k, wv)| h.get(k).is_some_and(|hv| is_subset(wv, hv, Some(k)))),
        (Value::Array(w), Value::Array(h)) if key.is_some_and(|k| KEYED_LISTS.contains(&k)) => w
            .iter()
            .all(|wv| h.iter().any(|hv| is_subset(wv, hv, None))),
        (Value::Array(w), Value::Array(h)) => {
            w.len() == h.len() && w.iter().zip(h).all(|(wv, hv)| is_subset(wv, hv, None))
        }
        (Value::String(w), Value::String(h)) if key.is_some_and(|k| QUANTITY_KEYS.contains(&k)) => {
            w == h
                || Quantity::from(w.as_str()).compare(&Quantity::from(h.as_str()))
                    == Some(std::cmp::Ordering::Equal)
        }
        _ => want == have,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn cm(data: &[(&str, &str)]) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some("c".into());
        c.data = Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        c
    }

    #[test]
    fn missing_objects_are_applied() {
        let mut want = cm(&[("a", "1")]);
        stamp(&mut want);
        assert!(needs_apply(&want, None));
    }

    #[test]
    fn a_converged_object_is_left_alone_even_with_fields_others_set() {
        let mut want = cm(&[("a", "1")]);
        stamp(&mut want);
        let mut live = want.clone();
        live.metadata.resource_version = Some("7".into());
        live.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("other".into(), "x".into());
        assert!(!needs_apply(&want, Some(&live)));
    }

    #[test]
    fn a_hand_edit_of_an_owned_field_is_drift() {
        let mut want = cm(&[("a", "1")]);
        stamp(&mut want);
        let mut live = want.clone();
        live.data = Some([("a".to_owned(), "2".to_owned())].into());
        assert!(needs_apply(&want, Some(&live)));
    }

    #[test]
    fn a_field_we_stopped_setting_changes_the_hash() {
        let mut old = cm(&[("a", "1"), ("b", "2")]);
        stamp(&mut old);
        let mut want = cm(&[("a", "1")]);
        stamp(&mut want);
        assert!(
            needs_apply(&want, Some(&old)),
            "b must be removed by applying"
        );
    }

    #[test]
    fn hash_is_stable_and_ignores_annotations() {
        let mut a = cm(&[("a", "1")]);
        let b = a.clone();
        stamp(&mut a);
        let h = a.metadata.annotations.clone().unwrap()[APPLIED_HASH_ANNOTATION].clone();
        assert_eq!(h, hash_of(&b));
        stamp(&mut a);
        assert_eq!(
            a.metadata.annotations.unwrap()[APPLIED_HASH_ANNOTATION],
            h,
            "stamping twice gives the same hash"
        );
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn lists_match_entry_for_entry_except_keyed_ones() {
        assert!(is_subset(
            &json!({"l": [{"a": 1}]}),
            &json!({"l": [{"a": 1, "b": 2}]}),
            None
        ));
        assert!(!is_subset(
            &json!({"l": [{"a": 1}]}),
            &json!({"l": [{"a": 1}, {"a": 2}]}),
            None
        ));
        assert!(!is_subset(
            &json!({"l": [1, 2]}),
            &json!({"l": [2, 1]}),
            None
        ));
        let owners = json!({"ownerReferences": [{"uid": "u1"}]});
        assert!(is_subset(
            &owners,
            &json!({"ownerReferences": [{"uid": "u0"}, {"uid": "u1", "controller": true}]}),
            None
        ));
        assert!(!is_subset(
            &owners,
            &json!({"ownerReferences": [{"uid": "u0"}]}),
            None
        ));
        assert!(!is_subset(&json!({"a": 1}), &json!({}), None));
    }

    #[test]
    fn quantities_compare_by_amount_only_where_they_are_quantities() {
        assert!(is_subset(
            &json!({"storage": "1.5Gi"}),
            &json!({"storage": "1536Mi"}),
            None
        ));
        assert!(is_subset(
            &json!({"guest": "1Gi"}),
            &json!({"guest": "1024Mi"}),
            None
        ));
        assert!(!is_subset(
            &json!({"storage": "1Gi"}),
            &json!({"storage": "2Gi"}),
            None
        ));
        assert!(!is_subset(
            &json!({"name": "1Gi"}),
            &json!({"name": "1024Mi"}),
            None
        ));
    }
}
