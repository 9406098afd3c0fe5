use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::*;

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
                p.field, p.verb, p.resource, p.subresource, p.namespace, p.name
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
            "a DataSource of the namespace: resolved on the remote later, so any PVC there",
            json!({"metadata": {"name": "db"}, "spec": {"disks": [
                {"name": "root", "source": {"dataSource": {"name": "golden"}}}],
                "cdroms": [{"name": "iso", "source": {"dataSource": {"name": "win", "namespace": "team"}}}]}}),
            &[
                // One review for both (the first field in order named).
                "spec.cdroms[0].source.dataSource.name create datavolumes/source team/",
                "spec.disks[0] update persistentvolumeclaims/ team/db-root",
                "spec.disks[0] delete persistentvolumeclaims/ team/db-root",
            ],
        ),
        (
            "another namespace's DataSource: the config's to allow, not asked",
            json!({"metadata": {"name": "db"}, "spec": {"cdroms": [
                {"name": "iso", "source": {"dataSource": {"name": "win", "namespace": "media"}}}]}}),
            &[],
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
