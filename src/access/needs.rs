//! Which permissions a Machine write needs from its author: a pure function of (old, new).
//!
//! Each kind of reference the operator follows on the author's behalf is one function in
//! [`SOURCES`]; a new source (CDI `datavolumes/source`, ConfigMaps) adds a function there.

use std::collections::BTreeSet;

use serde_json::Value;

use super::claims::{self, Candidate};
use super::{Permission, sources};
use crate::api::MachineSpec;

/// A Machine write as the access check sees it: the objects as the API server sent them
/// (after mutation), and the namespace they live in.
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    pub namespace: &'a str,
    /// The stored object on UPDATE; `None` on CREATE.
    pub old: Option<&'a Value>,
    pub new: &'a Value,
    /// Which of the [`claim_candidates`] exist, as the shell read them.
    pub existing_claims: &'a BTreeSet<String>,
}

impl Change<'_> {
    /// The Machine's name; validation sees it set, generateName included.
    fn machine(&self) -> &str {
        (self.new.pointer("/metadata/name").and_then(Value::as_str)).unwrap_or_default()
    }

    /// Both specs, typed. Admitted by the rules already, so the new one decodes; one that does
    /// not has nothing we could act on either.
    fn specs(&self) -> Option<(Option<MachineSpec>, MachineSpec)> {
        let spec = |v: &Value| -> Option<MachineSpec> {
            serde_json::from_value(v.get("spec")?.clone()).ok()
        };
        Some((self.old.and_then(spec), spec(self.new)?))
    }

    /// The value at `pointer` in the new object, when CREATE sets it or UPDATE changes it: an
    /// unchanged reference was checked when it was set and is not re-checked.
    pub fn set_or_changed(&self, pointer: &str) -> Option<&Value> {
        let new = self.new.pointer(pointer).filter(|v| !v.is_null())?;
        match self.old {
            Some(old) if old.pointer(pointer) == Some(new) => None,
            _ => Some(new),
        }
    }
}

/// The references a Machine can carry, each yielding the permissions it needs.
pub const SOURCES: &[fn(&Change) -> Vec<Permission>] =
    &[cloud_init_secret, disk_sources, adopted_claims];

/// Every permission the change needs from its author, in field order.
pub fn machine_needs(change: &Change) -> Vec<Permission> {
    SOURCES.iter().flat_map(|source| source(change)).collect()
}

/// `spec.cloudInit.secretRef`: the operator reads that Secret and hands its data to the guest,
/// so the author must be able to `get` it. Name or key changed: checked again.
fn cloud_init_secret(change: &Change) -> Vec<Permission> {
    let Some(reference) = change.set_or_changed("/spec/cloudInit/secretRef") else {
        return Vec::new();
    };
    let Some(name) = reference.get("name").and_then(Value::as_str) else {
        return Vec::new();
    };
    if name.is_empty() {
        // Refused by validation as a required field; nothing to read.
        return Vec::new();
    }
    vec![Permission {
        field: "spec.cloudInit.secretRef.name".to_owned(),
        verb: "get".to_owned(),
        group: String::new(),
        resource: "secrets".to_owned(),
        subresource: String::new(),
        namespace: change.namespace.to_owned(),
        name: name.to_owned(),
        adopted: false,
    }]
}

/// `spec.disks[].source` and `spec.cdroms[].source`: the operator creates DataVolumes that
/// clone or import on the author's behalf, so the author needs what CDI would ask of them (a
/// clone's `create datavolumes/source` in another namespace) and `get` on the credentials and
/// CA bundle the importer reads ([`sources`]). Sources new in this
/// request only: an unchanged one was checked when it was set.
fn disk_sources(change: &Change) -> Vec<Permission> {
    let Some((old, new)) = change.specs() else {
        return Vec::new();
    };
    sources::needed(change.namespace, old.as_ref(), &new)
}

/// The claims the shell must look up before [`machine_needs`]: those of the disks new in this
/// request ([`claims::candidates`]).
pub fn claim_candidates(change: &Change) -> Vec<Candidate> {
    let Some((old, new)) = change.specs() else {
        return Vec::new();
    };
    claims::candidates(change.machine(), old.as_ref(), &new)
}

/// `spec.disks[]` whose claim `<machine>-<disk>` exists already: the Machine adopts it, so
/// the author needs `update` and `delete` on it ([`claims`]).
fn adopted_claims(change: &Change) -> Vec<Permission> {
    let Some((old, new)) = change.specs() else {
        return Vec::new();
    };
    claims::needed(
        change.namespace,
        change.machine(),
        old.as_ref(),
        &new,
        change.existing_claims,
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with_ref(name: &str, key: Option<&str>) -> Value {
        let mut r = json!({"name": name});
        if let Some(k) = key {
            r["key"] = json!(k);
        }
        json!({"metadata": {"name": "m"}, "spec": {"cloudInit": {"secretRef": r}}})
    }

    /// (verb, resource, namespace/name)
    type Needed = Vec<(String, String, String)>;

    fn needed(old: Option<&Value>, new: &Value) -> Needed {
        machine_needs(&Change {
            namespace: "team-a",
            old,
            new,
            existing_claims: &BTreeSet::new(),
        })
        .into_iter()
        .map(|p| (p.resource_path(), p))
        .map(|(r, p)| (p.verb, r, format!("{}/{}", p.namespace, p.name)))
        .collect()
    }

    #[test]
    fn secret_ref_needs_get_on_create_and_on_changed_updates_only() {
        let boot = with_ref("boot", None);
        let get_boot = vec![("get".into(), "secrets".into(), "team-a/boot".into())];
        let none = json!({"spec": {"cpu": {"cores": 2}}});
        let cases: &[(&str, Option<&Value>, &Value, Needed)] = &[
            ("create with a reference", None, &boot, get_boot.clone()),
            ("create without", None, &none, vec![]),
            ("update, reference unchanged", Some(&boot), &boot, vec![]),
            (
                "update, other Secret",
                Some(&boot),
                &with_ref("other", None),
                vec![("get".into(), "secrets".into(), "team-a/other".into())],
            ),
            (
                "update, other key",
                Some(&boot),
                &with_ref("boot", Some("cfg")),
                get_boot.clone(),
            ),
            (
                "update, reference added",
                Some(&none),
                &boot,
                get_boot.clone(),
            ),
            ("update, reference removed", Some(&boot), &none, vec![]),
            (
                "empty name (validation refuses it)",
                None,
                &with_ref("", None),
                vec![],
            ),
        ];
        for (what, old, new, want) in cases {
            assert_eq!(&needed(*old, new), want, "{what}");
        }
    }

    #[test]
    fn new_disk_sources_need_cdis_clone_right_and_their_credentials() {
        let clone = json!({"spec": {"disks": [
            {"name": "root", "source": {"pvc": {"name": "golden", "namespace": "os-images"}}}],
            "cdroms": [{"name": "iso", "source": {"http": {"url": "https://a/b.iso",
                "secretRef": {"name": "creds"}}}}]}});
        let fields = |old: Option<&Value>, new: &Value| -> Vec<(String, String, String)> {
            machine_needs(&Change {
                namespace: "team-a",
                old,
                new,
                existing_claims: &BTreeSet::new(),
            })
            .into_iter()
            .map(|p| (p.field.clone(), p.verb.clone(), p.resource_path()))
            .collect()
        };
        assert_eq!(
            fields(None, &clone),
            [
                (
                    "spec.disks[0].source.pvc.namespace".to_owned(),
                    "create".to_owned(),
                    "datavolumes/source".to_owned()
                ),
                (
                    "spec.cdroms[0].source.http.secretRef.name".to_owned(),
                    "get".to_owned(),
                    "secrets".to_owned()
                ),
            ]
        );
        // Unchanged sources (labels edited, say) are not asked again.
        assert!(fields(Some(&clone), &clone).is_empty());
        let same_ns = json!({"spec": {"disks": [
            {"name": "root", "source": {"pvc": {"name": "golden"}}}]}});
        assert!(fields(None, &same_ns).is_empty());
    }

    #[test]
    fn an_existing_claim_of_a_new_disk_needs_update_and_delete_named() {
        let db = json!({"metadata": {"name": "db"},
            "spec": {"disks": [{"name": "root"}, {"name": "data", "size": "1Gi"}]}});
        let existing: BTreeSet<String> = ["db-data".to_owned()].into();
        let change = Change {
            namespace: "team-a",
            old: None,
            new: &db,
            existing_claims: &existing,
        };
        let candidates: Vec<String> = claim_candidates(&change)
            .into_iter()
            .map(|c| c.claim)
            .collect();
        assert_eq!(candidates, ["db-root", "db-data"]);
        let denials: Vec<String> = machine_needs(&change)
            .iter()
            .map(|p| {
                let denial = super::super::Denial {
                    user: "bob",
                    permission: p,
                };
                format!("{}: {denial}", p.field)
            })
            .collect();
        assert_eq!(
            denials,
            [
                r#"spec.disks[1]: user "bob" cannot update persistentvolumeclaims "db-data" in namespace "team-a", which exists and would be adopted by this disk"#,
                r#"spec.disks[1]: user "bob" cannot delete persistentvolumeclaims "db-data" in namespace "team-a", which exists and would be adopted by this disk"#,
            ]
        );
        // Kept on UPDATE: asked when it was added, not again.
        let kept = Change {
            old: Some(&db),
            ..change
        };
        assert!(claim_candidates(&kept).is_empty() && machine_needs(&kept).is_empty());
    }

    #[test]
    fn denial_names_verb_resource_and_namespace_only() {
        let p = &machine_needs(&Change {
            namespace: "team-a",
            old: None,
            new: &with_ref("db-password", Some("k")),
            existing_claims: &BTreeSet::new(),
        })[0];
        let text = super::super::Denial {
            user: "bob",
            permission: p,
        }
        .to_string();
        assert_eq!(
            text,
            r#"user "bob" cannot get secrets in namespace "team-a""#
        );
        assert!(!text.contains("db-password"));
        let cdi = Permission {
            group: "cdi.kubevirt.io".into(),
            resource: "datavolumes".into(),
            subresource: "source".into(),
            verb: "create".into(),
            ..p.clone()
        };
        assert_eq!(
            super::super::Denial {
                user: "bob",
                permission: &cdi
            }
            .to_string(),
            r#"user "bob" cannot create datavolumes/source.cdi.kubevirt.io in namespace "team-a""#
        );
    }
}
