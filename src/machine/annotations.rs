//! The Machine annotations the operator acts on, checked like fields: a value the reconciler
//! would read differently from what its author meant is refused at admission.

use serde_json::Value;

use crate::api::names::RETAIN_DISKS_ANNOTATION;

use super::field_error::{FieldError, FieldPath};

/// What `vitistack.io/retain-disks` may hold. The reconciler keeps the disks on `"true"` only, so
/// `"True"` or `"yes"` would silently mean "delete them".
pub const RETAIN_DISKS_VALUES: &[&str] = &["false", "true"];

/// Errors in the annotations `new` sets or changes (compared with `old`, the stored object on
/// UPDATE). A value kept from the stored object is not refused again: it was stored before this
/// rule, and refusing it would block every later update, the finalizer's removal among them.
pub fn annotation_errors(old: Option<&Value>, new: &Value) -> Vec<FieldError> {
    let value = |object: &Value| {
        object
            .pointer("/metadata/annotations")?
            .get(RETAIN_DISKS_ANNOTATION)
            .cloned()
    };
    let Some(set) = value(new) else {
        return Vec::new();
    };
    if old.and_then(value).as_ref() == Some(&set) {
        return Vec::new();
    }
    match set.as_str() {
        Some(s) if RETAIN_DISKS_VALUES.contains(&s) => Vec::new(),
        // The API server types annotations as strings; anything else is its to refuse.
        None => Vec::new(),
        Some(s) => {
            let path = format!("metadata.annotations[{RETAIN_DISKS_ANNOTATION}]");
            vec![FieldError::not_supported(
                &FieldPath::new(&path),
                s,
                RETAIN_DISKS_VALUES,
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn annotated(value: Option<&str>) -> Value {
        match value {
            Some(v) => json!({"metadata": {"annotations": {RETAIN_DISKS_ANNOTATION: v}}}),
            None => json!({"metadata": {"name": "vm"}}),
        }
    }

    #[test]
    fn retain_disks_is_true_or_false_when_set_or_changed() {
        let refused = |v: &str| {
            format!(
                r#"metadata.annotations[vitistack.io/retain-disks]: Unsupported value: "{v}": supported values: "false", "true""#
            )
        };
        // (what, the stored value if UPDATE, the value sent, errors)
        type Case<'a> = (
            &'a str,
            Option<Option<&'a str>>,
            Option<&'a str>,
            Vec<String>,
        );
        let cases: &[Case] = &[
            ("create, true", None, Some("true"), vec![]),
            ("create, false", None, Some("false"), vec![]),
            ("create, none", None, None, vec![]),
            ("create, True", None, Some("True"), vec![refused("True")]),
            ("create, yes", None, Some("yes"), vec![refused("yes")]),
            ("create, empty", None, Some(""), vec![refused("")]),
            (
                "update, set to 1",
                Some(None),
                Some("1"),
                vec![refused("1")],
            ),
            (
                "update, true to TRUE",
                Some(Some("true")),
                Some("TRUE"),
                vec![refused("TRUE")],
            ),
            (
                "update, stored True kept",
                Some(Some("True")),
                Some("True"),
                vec![],
            ),
            (
                "update, stored True fixed",
                Some(Some("True")),
                Some("true"),
                vec![],
            ),
            ("update, removed", Some(Some("yes")), None, vec![]),
        ];
        for (what, old, new, want) in cases {
            let old = old.map(annotated);
            let got: Vec<String> = annotation_errors(old.as_ref(), &annotated(*new))
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(&got, want, "{what}");
        }
        // No metadata at all: nothing to check.
        assert!(annotation_errors(None, &json!({})).is_empty());
    }
}
