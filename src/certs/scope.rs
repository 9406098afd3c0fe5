//! Which namespaces the webhooks are called for: the reconciler's watch scope, so that Machines
//! (and NetworkConfigurations) outside `--watch-namespaces` are neither mutated nor validated.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::api::names::NAMESPACE_NAME_LABEL;
use crate::config::WatchScope;

/// The webhooks' namespaceSelector for `scope`: every namespace, or those whose name label
/// (set by kube-apiserver 1.21+) is one of the watched names.
pub fn namespace_selector(scope: &WatchScope) -> LabelSelector {
    match scope {
        WatchScope::All => LabelSelector::default(),
        WatchScope::Namespaces(names) => LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.to_owned(),
                operator: "In".to_owned(),
                values: Some(names.clone()),
            }]),
            match_labels: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn the_selector_follows_the_watch_scope() {
        let names = |n: &[&str]| WatchScope::Namespaces(n.iter().map(|s| (*s).into()).collect());
        let cases: [(WatchScope, Value); 3] = [
            (WatchScope::All, json!({})),
            (
                names(&["a"]),
                json!({"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a"]}]}),
            ),
            (
                names(&["team-a", "team-b"]),
                json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                    "operator": "In", "values": ["team-a", "team-b"]}]}),
            ),
        ];
        for (scope, want) in cases {
            assert_eq!(json!(namespace_selector(&scope)), want, "{scope:?}");
        }
    }
}
