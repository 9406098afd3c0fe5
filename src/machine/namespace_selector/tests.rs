use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

use super::selects;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn a_namespace_is_placed_only_where_the_selector_selects_it() {
    let selector =
        |v: serde_json::Value| -> LabelSelector { serde_json::from_value(v).expect("selector") };
    let team = labels(&[("tenant", "a"), ("tier", "prod")]);
    let cases: &[(&str, Option<LabelSelector>, bool)] = &[
        ("no selector: every namespace", None, true),
        (
            "empty selector: every namespace",
            Some(selector(json!({}))),
            true,
        ),
        (
            "matchLabels met",
            Some(selector(json!({"matchLabels": {"tenant": "a"}}))),
            true,
        ),
        (
            "matchLabels other value",
            Some(selector(json!({"matchLabels": {"tenant": "b"}}))),
            false,
        ),
        (
            "matchLabels absent key",
            Some(selector(json!({"matchLabels": {"zone": "x"}}))),
            false,
        ),
        (
            "In",
            Some(selector(
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["prod", "dev"]}]}),
            )),
            true,
        ),
        (
            "In, not among",
            Some(selector(
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["dev"]}]}),
            )),
            false,
        ),
        (
            "NotIn",
            Some(selector(
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["prod"]}]}),
            )),
            false,
        ),
        (
            "NotIn, key absent",
            Some(selector(
                json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["x"]}]}),
            )),
            true,
        ),
        (
            "Exists",
            Some(selector(
                json!({"matchExpressions": [{"key": "tenant", "operator": "Exists"}]}),
            )),
            true,
        ),
        (
            "DoesNotExist",
            Some(selector(
                json!({"matchExpressions": [{"key": "tenant", "operator": "DoesNotExist"}]}),
            )),
            false,
        ),
        (
            "unknown operator: fail closed",
            Some(selector(
                json!({"matchExpressions": [{"key": "tenant", "operator": "Gt", "values": ["1"]}]}),
            )),
            false,
        ),
        (
            "labels and expressions both needed",
            Some(selector(json!({"matchLabels": {"tenant": "a"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["dev"]}]}))),
            false,
        ),
    ];
    for (what, selector, want) in cases {
        assert_eq!(selects(selector.as_ref(), &team), *want, "{what}");
    }
    assert!(!selects(
        Some(&selector(json!({"matchLabels": {"tenant": "a"}}))),
        &labels(&[])
    ));
}
