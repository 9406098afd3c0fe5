use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn selector(v: serde_json::Value) -> LabelSelector {
    serde_json::from_value(v).expect("selector")
}

/// One row: a Machine (deleting or not) in a namespace labelled `labels`, on a KubevirtConfig
/// with `selector`.
struct Row<'a> {
    what: &'a str,
    deleting: bool,
    selector: Option<&'a LabelSelector>,
    labels: &'a BTreeMap<String, String>,
    forbidden: bool,
}

#[test]
fn placement_is_allowed_only_in_a_selected_namespace() {
    let tenant_a = selector(json!({"matchLabels": {"tenant": "a"}}));
    let empty = selector(json!({}));
    let (a, b, none) = (
        labels(&[("tenant", "a")]),
        labels(&[("tenant", "b")]),
        labels(&[]),
    );
    let row = |what, deleting, selector, labels, forbidden| Row {
        what,
        deleting,
        selector,
        labels,
        forbidden,
    };
    let rows = [
        row("no selector: every namespace", false, None, &b, false),
        row(
            "an empty selector: every namespace",
            false,
            Some(&empty),
            &none,
            false,
        ),
        row("selected", false, Some(&tenant_a), &a, false),
        row(
            "another tenant's namespace",
            false,
            Some(&tenant_a),
            &b,
            true,
        ),
        row(
            "an unlabelled (or gone) namespace",
            false,
            Some(&tenant_a),
            &none,
            true,
        ),
        row(
            "deleting: the cleanup is never held",
            true,
            Some(&tenant_a),
            &b,
            false,
        ),
    ];
    for r in rows {
        let placed = Placed {
            namespace: "team-b",
            deleting: r.deleting,
            selector: r.selector,
        };
        assert_eq!(
            forbidden(&placed, r.labels).is_some(),
            r.forbidden,
            "{}",
            r.what
        );
    }
}

#[test]
fn labels_are_read_only_when_they_decide() {
    let tenant_a = selector(json!({"matchLabels": {"tenant": "a"}}));
    let placed = |deleting, selector| Placed {
        namespace: "team-b",
        deleting,
        selector,
    };
    assert!(placed(false, Some(&tenant_a)).asks_labels());
    assert!(!placed(false, None).asks_labels(), "no selector: no read");
    assert!(!placed(true, Some(&tenant_a)).asks_labels(), "deleting");
}

#[test]
fn the_message_names_the_namespace_and_the_way_out() {
    let tenant_a = selector(json!({"matchLabels": {"tenant": "a"}}));
    let placed = Placed {
        namespace: "team-b",
        deleting: false,
        selector: Some(&tenant_a),
    };
    let message = forbidden(&placed, &labels(&[])).expect("forbidden");
    assert!(
        message.starts_with(r#"its namespaceSelector does not select namespace "team-b""#),
        "{message}"
    );
    assert!(
        message.contains("nothing is made or changed there"),
        "{message}"
    );
}
