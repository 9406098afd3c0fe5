//! The finalizer-only matchCondition, evaluated by a CEL interpreter (the `cel` crate) over the
//! AdmissionReview bodies of the golden set in `webhooks/` (the ones tests/webhook_golden.rs
//! replays through the server) and edits of them: `true` means kube-apiserver calls the webhook,
//! `false` that it skips it.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::certs::config::CertificateArgs;

fn review(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("webhooks")
        .join(format!("{name}.request.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// Whether kube-apiserver would call the webhook for `review`: the condition's value, as
/// Kubernetes binds it (`object`, `oldObject` (null unless UPDATE), `request`).
fn calls_webhook(review: &Value) -> bool {
    let env = Arc::new(cel::Env::stdlib());
    let program = env.compile(FINALIZER_ONLY_EXPRESSION).unwrap();
    let mut ctx = cel::Context::with_env(env);
    let request = &review["request"];
    for (var, value) in [
        ("object", &request["object"]),
        ("oldObject", &request["oldObject"]),
        ("request", request),
    ] {
        ctx.add_variable_from_value(var, cel::to_value(value).unwrap());
    }
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("the condition must give a bool, not {other:?}"),
    }
}

/// `review` with `edit` applied to its object.
fn edited(mut review: Value, edit: impl FnOnce(&mut Value)) -> Value {
    edit(&mut review["request"]["object"]);
    review
}

const FINALIZER_REMOVED: &str =
    "111-validate-update-retain-disks-stored-value-kept-finalizer-removed";

#[test]
fn a_finalizer_only_update_skips_the_webhook() {
    let removed = review(FINALIZER_REMOVED);
    assert!(!calls_webhook(&removed), "our finalizer removed");
    // What the API server changes itself on every write does not count.
    let noisy = edited(removed.clone(), |o| {
        o["metadata"]["resourceVersion"] = json!("4712");
        o["metadata"]["managedFields"] = json!([{"manager": "kubectl-patch",
            "operation": "Update", "apiVersion": "vitistack.io/v1alpha1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:finalizers": {}}}}]);
    });
    assert!(!calls_webhook(&noisy), "managedFields, resourceVersion");
    // Adding one, or the list appearing where there was none: a finalizer-only change too.
    let mut added = removed.clone();
    let request = &mut added["request"];
    let old = request["oldObject"].take();
    request["oldObject"] = request["object"].take();
    request["object"] = old;
    assert!(!calls_webhook(&added), "a finalizer added");
    let appeared = edited(removed.clone(), |o| {
        o["metadata"]["finalizers"] = json!(["example.com/keep"]);
    });
    let appeared = {
        let mut r = appeared;
        r["request"]["oldObject"]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("finalizers");
        r
    };
    assert!(!calls_webhook(&appeared), "finalizers absent before");
}

#[test]
fn any_other_change_calls_the_webhook() {
    let removed = review(FINALIZER_REMOVED);
    let cases = [
        (
            "spec changed",
            review("25-mutate-update-template-change-rederives-template-values-keeps-overrides"),
        ),
        (
            "labels changed",
            review("24-mutate-update-metadata-only-no-patch"),
        ),
        (
            "finalizer removed and spec changed",
            review("98-mutate-update-removed-finalizer-not-added-back"),
        ),
        (
            "finalizer removed and a label added",
            edited(removed.clone(), |o| {
                o["metadata"]["labels"] = json!({"team": "a"});
            }),
        ),
        (
            "finalizer removed and an annotation dropped",
            edited(removed.clone(), |o| {
                o["metadata"].as_object_mut().unwrap().remove("annotations");
            }),
        ),
        (
            "finalizer removed and a top-level field added",
            edited(removed.clone(), |o| o["extra"] = json!({})),
        ),
        (
            "nothing changed",
            review("23-mutate-idempotent-update-of-stored-object"),
        ),
        (
            "CREATE (oldObject null)",
            review("01-mutate-template-small"),
        ),
        ("DELETE (object null)", review("34-mutate-delete-denied")),
    ];
    for (what, review) in cases {
        assert!(calls_webhook(&review), "{what}");
    }
}

fn settings() -> Settings {
    let lifetimes = CertificateArgs::default().lifetimes().unwrap();
    Settings::new("kubevirt-operator-system", None, lifetimes).unwrap()
}

#[test]
fn every_webhook_carries_the_condition_only_when_asked() {
    let plain = validating(&settings(), b"");
    let hooks = plain.webhooks.as_ref().unwrap();
    assert!(hooks.iter().all(|h| h.match_conditions.is_none()));
    let skipping = skipping_finalizer_updates(plain.clone());
    let m = skipping_finalizer_updates(mutating(&settings(), b""));
    let conditions = skipping
        .webhooks
        .iter()
        .flatten()
        .map(|h| &h.match_conditions)
        .chain(m.webhooks.iter().flatten().map(|h| &h.match_conditions));
    let mut n = 0;
    for c in conditions {
        n += 1;
        let c = c.as_ref().unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, FINALIZER_ONLY_CONDITION);
        assert_eq!(c[0].expression, FINALIZER_ONLY_EXPRESSION);
    }
    assert_eq!(n, hooks.len() + 1);
}

/// An outage must never block status writes: no webhook matches a subresource (`machines`
/// matches the main resource only, never `machines/status`), nor DELETE.
#[test]
fn no_webhook_matches_status_writes_or_deletes() {
    let v = validating(&settings(), b"");
    let m = mutating(&settings(), b"");
    let rules = v
        .webhooks
        .iter()
        .flatten()
        .flat_map(|h| h.rules.iter().flatten())
        .chain(
            m.webhooks
                .iter()
                .flatten()
                .flat_map(|h| h.rules.iter().flatten()),
        );
    for r in rules {
        for res in r.resources.iter().flatten() {
            assert!(!res.contains('/') && !res.contains('*'), "{res}");
        }
        assert_eq!(
            r.operations.as_deref(),
            Some(&["CREATE".into(), "UPDATE".into()][..])
        );
    }
}
