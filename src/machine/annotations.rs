//! The Machine annotations the operator acts on, checked like fields: a value the reconciler
//! would read differently from what its author meant is refused at admission.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::api::names::{
    ABANDON_REMOTE_ANNOTATION, KUBEVIRT_CONFIG_ANNOTATION, RESTARTED_AT_ANNOTATION,
    RETAIN_DISKS_ANNOTATION, STOPPED_AT_ANNOTATION,
};
use crate::api::operations::{RUN_STRATEGY_HALTED, run_strategy};

use super::field_error::{FieldError, FieldPath};

/// What `vitistack.io/retain-disks` and `vitistack.io/abandon-remote` may hold. The reconciler
/// acts on `"true"` only, so `"True"` or `"yes"` would silently mean "delete them" (or "wait").
pub const RETAIN_DISKS_VALUES: &[&str] = &["false", "true"];

/// How far ahead of the webhook's clock a `restarted-at` time may be (clocks drift).
pub const RESTART_CLOCK_SKEW_SECONDS: i64 = 300;

/// Errors in the annotations `new` sets or changes (compared with `old`, the stored object on
/// UPDATE). A value kept from the stored object is not refused again: it was stored before this
/// rule, and refusing it would block every later update, the finalizer's removal among them.
pub fn annotation_errors(old: Option<&Value>, new: &Value) -> Vec<FieldError> {
    annotation_errors_at(old, new, Timestamp::now())
}

/// [`annotation_errors`] with the clock given.
pub fn annotation_errors_at(old: Option<&Value>, new: &Value, now: Timestamp) -> Vec<FieldError> {
    let mut out = Vec::new();
    for key in [RETAIN_DISKS_ANNOTATION, ABANDON_REMOTE_ANNOTATION] {
        if let Some(s) = changed(old, new, key)
            && !RETAIN_DISKS_VALUES.contains(&s)
        {
            let path = format!("metadata.annotations[{key}]");
            out.push(FieldError::not_supported(
                &FieldPath::new(&path),
                s,
                RETAIN_DISKS_VALUES,
            ));
        }
    }
    if let Some(s) = changed(old, new, RESTARTED_AT_ANNOTATION) {
        out.extend(restart_error(new, s, now));
    }
    if let Some(s) = changed(old, new, STOPPED_AT_ANNOTATION)
        && s.parse::<Timestamp>().is_err()
    {
        let path = format!("metadata.annotations[{STOPPED_AT_ANNOTATION}]");
        out.push(FieldError::invalid(
            &FieldPath::new(&path),
            s,
            "must be an RFC 3339 time (when the Machine was stopped); remove it to start the Machine",
        ));
    }
    out.extend(placement_error(old, new));
    out
}

/// `vitistack.io/kubevirt-config`: a KubevirtConfig's name, fixed at creation (see
/// `machine::placement`).
fn placement_error(old: Option<&Value>, new: &Value) -> Option<FieldError> {
    let value = |object: &Value| {
        let v = object
            .pointer("/metadata/annotations")?
            .get(KUBEVIRT_CONFIG_ANNOTATION)?;
        v.as_str().map(str::to_owned)
    };
    let path = format!("metadata.annotations[{KUBEVIRT_CONFIG_ANNOTATION}]");
    let path = FieldPath::new(&path);
    let now = value(new);
    if let Some(old) = old {
        let why = crate::machine::placement::moved(value(old).as_deref(), now.as_deref())?;
        return Some(FieldError::forbidden(&path, why));
    }
    let name = now?;
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    (!valid).then(|| {
        FieldError::invalid(
            &path,
            name,
            "must be a KubevirtConfig's name (a DNS subdomain: lowercase letters, digits, '-' and '.')",
        )
    })
}

/// The value of `key` in `new` when it differs from `old`'s. The API server types annotations
/// as strings; anything else is its to refuse.
fn changed<'a>(old: Option<&Value>, new: &'a Value, key: &str) -> Option<&'a str> {
    let value = |object: &Value| object.pointer("/metadata/annotations")?.get(key).cloned();
    let set = new.pointer("/metadata/annotations")?.get(key)?;
    if old.and_then(value).as_ref() == Some(set) {
        return None;
    }
    set.as_str()
}

/// A restart: an RFC 3339 time, not ahead of now (the VM is restarted when it started before
/// it), of a Machine that runs.
fn restart_error(new: &Value, value: &str, now: Timestamp) -> Option<FieldError> {
    let path = format!("metadata.annotations[{RESTARTED_AT_ANNOTATION}]");
    let path = FieldPath::new(&path);
    let Ok(at) = value.parse::<Timestamp>() else {
        return Some(FieldError::invalid(
            &path,
            value,
            "must be an RFC 3339 time, e.g. 2026-11-24T10:00:00Z (`date -u +%FT%TZ`)",
        ));
    };
    if at.as_second() > now.as_second() + RESTART_CLOCK_SKEW_SECONDS {
        return Some(FieldError::invalid(
            &path,
            value,
            "must not be in the future: the VM is restarted if it started before this time",
        ));
    }
    let spec = new.get("spec");
    let strategy = run_strategy(
        spec.and_then(|s| s.get("runStrategy"))
            .and_then(Value::as_str),
        spec.and_then(|s| s.get("running")).and_then(Value::as_bool),
    );
    (strategy == RUN_STRATEGY_HALTED).then(|| {
        FieldError::forbidden(
            &path,
            "a Halted Machine has nothing to restart: start it (runStrategy: Always) instead",
        )
    })
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
    fn the_cluster_is_named_at_creation_and_never_changes() {
        let placed = |v: Option<&str>| match v {
            Some(v) => json!({"metadata": {"annotations": {KUBEVIRT_CONFIG_ANNOTATION: v}}}),
            None => json!({"metadata": {"name": "vm"}}),
        };
        let errors = |old: Option<Option<&str>>, new: Option<&str>| {
            let old = old.map(placed);
            annotation_errors(old.as_ref(), &placed(new))
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert!(errors(None, Some("dc1")).is_empty());
        assert!(errors(None, None).is_empty());
        assert!(errors(None, Some("DC_1"))[0].contains("KubevirtConfig's name"));
        assert!(errors(Some(Some("dc1")), Some("dc1")).is_empty());
        assert!(errors(Some(None), None).is_empty());
        for (old, new) in [
            (Some("dc1"), Some("dc2")),
            (None, Some("dc1")),
            (Some("dc1"), None),
        ] {
            let e = errors(Some(old), new);
            assert_eq!(e.len(), 1, "{old:?} -> {new:?}");
            assert!(
                e[0].starts_with("metadata.annotations[vitistack.io/kubevirt-config]: Forbidden"),
                "{}",
                e[0]
            );
        }
    }

    #[test]
    fn stopped_at_is_a_time_when_set_or_changed() {
        let stopped = |v: &str| json!({"metadata": {"annotations": {STOPPED_AT_ANNOTATION: v}}});
        assert!(annotation_errors(None, &stopped("2026-11-28T15:00:00Z")).is_empty());
        let e = annotation_errors(None, &stopped("true"));
        assert_eq!(e.len(), 1);
        assert!(
            e[0].to_string().starts_with(
                "metadata.annotations[vitistack.io/stopped-at]: Invalid value: \"true\""
            ),
            "{}",
            e[0]
        );
        // Kept from the stored object: not refused again.
        assert!(annotation_errors(Some(&stopped("true")), &stopped("true")).is_empty());
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

    #[test]
    fn abandon_remote_is_true_or_false_and_the_error_names_the_field() {
        let with = |v: &str| json!({"metadata": {"annotations": {ABANDON_REMOTE_ANNOTATION: v}}});
        let errors = |old: Option<&Value>, new: &Value| -> Vec<String> {
            annotation_errors(old, new)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert!(errors(None, &with("true")).is_empty());
        assert!(errors(Some(&json!({})), &with("false")).is_empty());
        for bad in ["yes", "True", "1", ""] {
            assert_eq!(
                errors(Some(&json!({})), &with(bad)),
                vec![format!(
                    r#"metadata.annotations[vitistack.io/abandon-remote]: Unsupported value: "{bad}": supported values: "false", "true""#
                )],
                "{bad}"
            );
        }
        // Stored before this rule: kept, so the finalizer's removal is never blocked.
        assert!(errors(Some(&with("yes")), &with("yes")).is_empty());
    }

    #[test]
    fn a_restart_is_a_past_rfc3339_time_of_a_machine_that_runs() {
        let now: Timestamp = "2026-11-25T10:00:00Z".parse().expect("now");
        let machine = |at: &str, spec: Value| json!({"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: at}}, "spec": spec});
        let errors = |old: Option<&Value>, new: &Value| -> Vec<String> {
            annotation_errors_at(old, new, now)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        let running = json!({"template": "small"});
        assert!(errors(None, &machine("2026-11-25T09:59:00Z", running.clone())).is_empty());
        assert!(
            errors(None, &machine("2026-11-25T10:04:00Z", running.clone())).is_empty(),
            "within the clock skew"
        );
        let e = errors(None, &machine("tomorrow", running.clone()));
        assert!(e[0].contains("must be an RFC 3339 time"), "{e:?}");
        let e = errors(None, &machine("2026-11-25T11:00:00Z", running.clone()));
        assert!(e[0].contains("must not be in the future"), "{e:?}");
        for halted in [json!({"runStrategy": "Halted"}), json!({"running": false})] {
            let e = errors(None, &machine("2026-11-25T09:00:00Z", halted));
            assert!(
                e[0].starts_with(
                    "metadata.annotations[vitistack.io/restarted-at]: Forbidden: a Halted Machine"
                ),
                "{e:?}"
            );
        }
        // A value kept from the stored object is not refused again (the Machine halted since).
        let stored = machine("2026-11-25T09:00:00Z", running);
        let halted = machine("2026-11-25T09:00:00Z", json!({"runStrategy": "Halted"}));
        assert!(errors(Some(&stored), &halted).is_empty());
    }
}
