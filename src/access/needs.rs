//! Which permissions a Machine write needs from its author: a pure function of (old, new).
//!
//! Each kind of reference the operator follows on the author's behalf is one function in
//! [`SOURCES`]; a new source (CDI `datavolumes/source`, ConfigMaps) adds a function there.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::claims::{self, Candidate};
use super::data_sources::{self, Ref, Target};
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
    /// Where the [`data_source_refs`] point, as the shell read them.
    pub data_sources: &'a BTreeMap<Ref, Target>,
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

    /// Whether the write changes what the guest boots or sees ([`GUEST_FIELDS`]); a CREATE
    /// always does. Such a write re-checks every reference of the new spec as its author: an
    /// author who may only update a Machine must not activate a dormant `secretRef` (by
    /// removing inline `userData`) or boot their own CD-ROM beside the Secret and the clones.
    pub fn guest_affected(&self) -> bool {
        let Some(old) = self.old else { return true };
        GUEST_FIELDS.iter().any(|p| {
            old.pointer(p).filter(|v| !v.is_null()) != self.new.pointer(p).filter(|v| !v.is_null())
        })
    }
}

/// What the guest boots or sees: its disks, CD-ROMs, boot order and cloud-init.
pub const GUEST_FIELDS: &[&str] = &[
    "/spec/disks",
    "/spec/cdroms",
    "/spec/bootOrder",
    "/spec/cloudInit",
];

/// The references a Machine can carry, each yielding the permissions it needs.
pub const SOURCES: &[fn(&Change) -> Vec<Permission>] =
    &[cloud_init_secret, disk_sources, adopted_claims];

/// Every permission the change needs from its author, in field order.
pub fn machine_needs(change: &Change) -> Vec<Permission> {
    SOURCES.iter().flat_map(|source| source(change)).collect()
}

/// `spec.cloudInit.secretRef`: the operator reads that Secret and hands its data to the guest,
/// so the author must be able to `get` it, on every write that changes what the guest sees.
fn cloud_init_secret(change: &Change) -> Vec<Permission> {
    if !change.guest_affected() {
        return Vec::new();
    }
    let Some(reference) =
        (change.new.pointer("/spec/cloudInit/secretRef")).filter(|v| !v.is_null())
    else {
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
/// CA bundle the importer reads ([`sources`]). Every source of the new spec on a write that
/// changes what the guest sees; none otherwise (sources cannot change then).
fn disk_sources(change: &Change) -> Vec<Permission> {
    let Some((_, new)) = change.specs() else {
        return Vec::new();
    };
    if !change.guest_affected() {
        return Vec::new();
    }
    sources::needed(change.namespace, None, &new, change.data_sources)
}

/// The DataSources the shell must resolve before [`machine_needs`]: those the new spec names,
/// on a write that changes what the guest sees.
pub fn data_source_refs(change: &Change) -> Vec<Ref> {
    match change.specs() {
        Some((_, new)) if change.guest_affected() => {
            data_sources::references(change.namespace, &new)
        }
        _ => Vec::new(),
    }
}

/// The `dataSource` sources that point nowhere CDI could clone from
/// ([`data_sources::unresolved`]): (field, DataSource).
pub fn unresolved_data_sources(change: &Change) -> Vec<(String, Ref)> {
    match change.specs() {
        Some((_, new)) if change.guest_affected() => {
            data_sources::unresolved(change.namespace, &new, change.data_sources)
                .into_iter()
                .map(|(field, r, _)| (field, r))
                .collect()
        }
        _ => Vec::new(),
    }
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
            data_sources: &BTreeMap::new(),
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
            (
                "update, nothing the guest sees changed",
                Some(&boot),
                &boot,
                vec![],
            ),
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
                "update, cpu only: the guest sees the same",
                Some(&boot),
                &{
                    let mut b = boot.clone();
                    b["spec"]["resources"] = json!({"cpu": {"cores": 4}});
                    b
                },
                vec![],
            ),
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
                data_sources: &BTreeMap::new(),
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
        // Nothing the guest sees changed (labels edited, say): not asked again.
        assert!(fields(Some(&clone), &clone).is_empty());
        // A same-namespace clone needs CDI's right too: the operator creates the DataVolume.
        let same_ns = json!({"spec": {"disks": [
            {"name": "root", "source": {"pvc": {"name": "golden"}}}]}});
        assert_eq!(fields(None, &same_ns).len(), 1);
    }

    #[test]
    fn a_write_changing_what_the_guest_sees_rechecks_every_reference() {
        // A dormant secretRef (inline userData wins), a clone, and a CD-ROM's credentials.
        let stored = json!({"metadata": {"name": "m"}, "spec": {
            "cloudInit": {"userData": "#cloud-config", "secretRef": {"name": "db-password"}},
            "disks": [{"name": "root", "source": {"pvc": {"name": "golden", "namespace": "os"}}}]}});
        let asked = |new: &Value| -> Vec<String> {
            machine_needs(&Change {
                namespace: "team-a",
                old: Some(&stored),
                new,
                existing_claims: &BTreeSet::new(),
                data_sources: &BTreeMap::new(),
            })
            .iter()
            .map(|p| {
                format!(
                    "{} {} {}/{}",
                    p.verb,
                    p.resource_path(),
                    p.namespace,
                    p.name
                )
            })
            .collect()
        };
        let every = [
            "get secrets team-a/db-password",
            "create datavolumes/source os/golden",
        ];
        // Inline userData removed: the dormant Secret takes effect.
        let mut activated = stored.clone();
        activated["spec"]["cloudInit"] = json!({"secretRef": {"name": "db-password"}});
        assert_eq!(asked(&activated), every);
        // A CD-ROM added and booted first, beside the Secret and the cloned disk.
        let mut cdrom = stored.clone();
        cdrom["spec"]["cdroms"] =
            json!([{"name": "mine", "source": {"http": {"url": "https://a/b.iso"}}}]);
        cdrom["spec"]["bootOrder"] = json!(["cdrom", "disk"]);
        assert_eq!(asked(&cdrom), every);
        // Boot order alone.
        let mut boot = stored.clone();
        boot["spec"]["bootOrder"] = json!(["network", "disk"]);
        assert_eq!(asked(&boot), every);
        // CPU and memory only: nothing the guest boots or sees.
        let mut cpu = stored.clone();
        cpu["spec"]["resources"] = json!({"cpu": {"cores": 8}});
        assert!(asked(&cpu).is_empty());
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
            data_sources: &BTreeMap::new(),
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
            data_sources: &BTreeMap::new(),
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
            // A clone source is named: the author named it, and CDI's refusal names it too.
            r#"user "bob" cannot create datavolumes/source.cdi.kubevirt.io "db-password" in namespace "team-a""#
        );
    }
}
