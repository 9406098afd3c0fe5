use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

use super::*;

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
        ("empty selector: every namespace", Some(selector(json!({}))), true),
        ("matchLabels met", Some(selector(json!({"matchLabels": {"tenant": "a"}}))), true),
        ("matchLabels other value", Some(selector(json!({"matchLabels": {"tenant": "b"}}))), false),
        ("matchLabels absent key", Some(selector(json!({"matchLabels": {"zone": "x"}}))), false),
        (
            "In",
            Some(selector(json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["prod", "dev"]}]}))),
            true,
        ),
        (
            "In, not among",
            Some(selector(json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["dev"]}]}))),
            false,
        ),
        (
            "NotIn",
            Some(selector(json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["prod"]}]}))),
            false,
        ),
        (
            "NotIn, key absent",
            Some(selector(json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["x"]}]}))),
            true,
        ),
        (
            "Exists",
            Some(selector(json!({"matchExpressions": [{"key": "tenant", "operator": "Exists"}]}))),
            true,
        ),
        (
            "DoesNotExist",
            Some(selector(json!({"matchExpressions": [{"key": "tenant", "operator": "DoesNotExist"}]}))),
            false,
        ),
        (
            "unknown operator: fail closed",
            Some(selector(json!({"matchExpressions": [{"key": "tenant", "operator": "Gt", "values": ["1"]}]}))),
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
        assert_eq!(namespace_selected(selector.as_ref(), &team), *want, "{what}");
    }
    assert!(!namespace_selected(
        Some(&selector(json!({"matchLabels": {"tenant": "a"}}))),
        &labels(&[])
    ));
}

#[test]
fn placement_needs_use_on_the_config_by_name() {
    let p = placement_need("dc1");
    assert_eq!(
        p.review_key(),
        ["use", "vitistack.io", "kubevirtconfigs", "", "", "dc1"]
    );
    assert_eq!(
        crate::access::Denial {
            user: "bob",
            permission: &p,
            cluster: None,
        }
        .to_string(),
        r#"user "bob" cannot use kubevirtconfigs.vitistack.io "dc1""#
    );
}

fn short(needs: &[Permission]) -> Vec<String> {
    needs
        .iter()
        .map(|p| {
            format!(
                "{} {} {}/{} {}/{}",
                p.field,
                p.verb,
                p.resource,
                p.subresource,
                p.namespace,
                p.name
            )
        })
        .collect()
}

#[test]
fn a_remote_machine_is_asked_what_a_local_one_is() {
    let none = BTreeSet::new();
    let sources = BTreeMap::new();
    let change = |new: &serde_json::Value| -> Vec<String> {
        short(&remote_needs(&Change {
            namespace: "team",
            old: None,
            new,
            existing_claims: &none,
            data_sources: &sources,
        }))
    };
    let cases: &[(&str, serde_json::Value, &[&str])] = &[
        (
            "every new disk's claim, as if it existed there",
            json!({"metadata": {"name": "db"}, "spec": {"disks": [{"name": "root"}]}}),
            &[
                "spec.disks[0] update persistentvolumeclaims/ team/db-root",
                "spec.disks[0] delete persistentvolumeclaims/ team/db-root",
            ],
        ),
        (
            "a same-namespace clone",
            json!({"metadata": {"name": "db"}, "spec": {"disks": [
                {"name": "root", "source": {"pvc": {"name": "golden"}}}]}}),
            &[
                "spec.disks[0].source.pvc.namespace create datavolumes/source team/golden",
                "spec.disks[0] update persistentvolumeclaims/ team/db-root",
                "spec.disks[0] delete persistentvolumeclaims/ team/db-root",
            ],
        ),
        (
            "another namespace's clone: the config's to allow, not asked",
            json!({"metadata": {"name": "db"}, "spec": {"disks": [
                {"name": "root", "source": {"pvc": {"name": "golden", "namespace": "images"}}}]}}),
            &[
                "spec.disks[0] update persistentvolumeclaims/ team/db-root",
                "spec.disks[0] delete persistentvolumeclaims/ team/db-root",
            ],
        ),
        (
            "credentials and cloud-init",
            json!({"metadata": {"name": "db"}, "spec": {
                "cloudInit": {"secretRef": {"name": "ci"}},
                "cdroms": [{"name": "iso", "source": {"http": {"url": "https://a/b",
                    "secretRef": {"name": "creds"}, "certConfigMap": "ca"}}}]}}),
            &[
                "spec.cloudInit.secretRef.name get secrets/ team/ci",
                "spec.cdroms[0].source.http.certConfigMap get configmaps/ team/ca",
                "spec.cdroms[0].source.http.secretRef.name get secrets/ team/creds",
            ],
        ),
    ];
    for (what, new, want) in cases {
        assert_eq!(change(new), *want, "{what}");
    }
}
