//! What a Machine's sources let its author reach, as the permissions the author must hold:
//! the operator writes DataVolumes under its own identity, so the admission webhook asks the API
//! server (SubjectAccessReview) whether the author could do the same natively.
//!
//! - every clone, same namespace included: CDI's rule, `create` on `datavolumes/source` in the
//!   source namespace, named like the PVC. CDI lets a same-namespace clone through unasked
//!   because it assumes the DataVolume's creator holds `create datavolumes` there; the creator
//!   is the operator, not the author, so the author is asked;
//! - a `secretRef` or `certConfigMap`: `get` on that Secret or ConfigMap in the Machine's
//!   namespace (the importer reads it on the author's behalf).
//!
//! Sources are compared per volume name: a source counts as new unless the same disk (or
//! CD-ROM) had it before, so copying another disk's clone source onto a new disk is asked too.

use std::collections::BTreeMap;

use super::Permission;
use super::data_sources::{Ref, Target};
use crate::api::MachineSpec;
use crate::api::source::DiskSource;

pub const CDI_GROUP: &str = "cdi.kubevirt.io";

/// The permissions the sources new in `new` (compared with `old`) need, without repeats.
pub fn needed(
    namespace: &str,
    old: Option<&MachineSpec>,
    new: &MachineSpec,
    data_sources: &BTreeMap<Ref, Target>,
) -> Vec<Permission> {
    let before: Vec<(&str, &DiskSource)> = old
        .map(|o| sources(o).into_iter().map(|(_, n, s)| (n, s)).collect())
        .unwrap_or_default();
    let mut out: Vec<Permission> = sources(new)
        .into_iter()
        .filter(|(_, n, s)| !before.contains(&(*n, *s)))
        .flat_map(|(path, _, s)| for_source(namespace, &path, s, data_sources))
        .collect();
    out.sort_by(|a, b| (a.review_key().cmp(&b.review_key())).then_with(|| a.field.cmp(&b.field)));
    out.dedup_by(|a, b| a.review_key() == b.review_key());
    out
}

/// Each source with the path of its `source` field and its volume's name (a disk's and a
/// CD-ROM's never share one).
fn sources(spec: &MachineSpec) -> Vec<(String, &str, &DiskSource)> {
    let disks = spec.disks.iter().enumerate().filter_map(|(i, d)| {
        let path = format!("spec.disks[{i}].source");
        Some((path, d.name.as_str(), d.source.as_ref()?))
    });
    let cdroms = (spec.cdroms.iter().enumerate()).map(|(i, c)| {
        (
            format!("spec.cdroms[{i}].source"),
            c.name.as_str(),
            &c.source,
        )
    });
    disks.chain(cdroms).collect()
}

fn for_source(
    namespace: &str,
    path: &str,
    s: &DiskSource,
    data_sources: &BTreeMap<Ref, Target>,
) -> Vec<Permission> {
    let get = |resource: &str, name: &str, field: &str| Permission {
        verb: "get".to_owned(),
        group: String::new(),
        resource: resource.to_owned(),
        subresource: String::new(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        field: format!("{path}.{field}"),
        adopted: false,
    };
    let mut out = Vec::new();
    if let Some(h) = &s.http {
        out.extend((h.secret_ref.as_ref()).map(|r| get("secrets", &r.name, "http.secretRef.name")));
        out.extend(
            (h.cert_config_map.as_ref()).map(|c| get("configmaps", c, "http.certConfigMap")),
        );
    }
    if let Some(r) = &s.registry {
        out.extend(
            (r.secret_ref.as_ref()).map(|r| get("secrets", &r.name, "registry.secretRef.name")),
        );
    }
    let clone = |namespace: &str, name: &str, field: String| Permission {
        verb: "create".to_owned(),
        group: CDI_GROUP.to_owned(),
        resource: "datavolumes".to_owned(),
        subresource: "source".to_owned(),
        namespace: namespace.to_owned(),
        // CDI asks about the PVC by name, so a grant limited by `resourceNames` works.
        name: name.to_owned(),
        field,
        adopted: false,
    };
    if let Some(p) = &s.pvc {
        let ns = p.namespace.as_deref().unwrap_or(namespace);
        out.push(clone(ns, &p.name, format!("{path}.pvc.namespace")));
    }
    if let Some(v) = &s.snapshot {
        // CDI asks the same right for a snapshot clone, named like the VolumeSnapshot.
        let ns = v.namespace.as_deref().unwrap_or(namespace);
        out.push(clone(ns, &v.name, format!("{path}.snapshot.namespace")));
    }
    if let Some(d) = &s.data_source {
        // What the DataSource points to, as resolved by the shell; one that points nowhere is
        // refused by the caller (`data_sources::unresolved`).
        let key = (
            d.namespace.clone().unwrap_or_else(|| namespace.to_owned()),
            d.name.clone(),
        );
        if let Some((ns, name, _)) = data_sources.get(&key).and_then(Target::source) {
            out.push(clone(ns, name, format!("{path}.dataSource.name")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(v: serde_json::Value) -> MachineSpec {
        serde_json::from_value(v).unwrap()
    }

    fn short(n: &[Permission]) -> Vec<String> {
        n.iter()
            .map(|n| {
                format!(
                    "{} {}/{}/{} in {} {}",
                    n.verb, n.group, n.resource, n.subresource, n.namespace, n.name
                )
            })
            .collect()
    }

    #[test]
    fn clones_from_other_namespaces_and_credentials() {
        let s = spec(json!({
            "disks": [
                {"name": "a", "source": {"pvc": {"name": "golden", "namespace": "os-images"}}},
                {"name": "b", "source": {"dataSource": {"name": "d", "namespace": "os-images"}}},
                {"name": "c", "source": {"pvc": {"name": "local"}}},
                {"name": "d", "source": {"pvc": {"name": "same", "namespace": "team"}}},
                {"name": "e", "size": "1Gi", "source": {"http": {"url": "https://a/b", "secretRef": {"name": "creds"}, "certConfigMap": "ca"}}},
                {"name": "f", "size": "1Gi"},
                {"name": "g", "source": {"snapshot": {"name": "vmsnapshot-1-volume-root"}}}
            ],
            "cdroms": [{"name": "iso", "source": {"registry": {"url": "docker://q/a", "secretRef": {"name": "pull"}}}}]
        }));
        // Same-namespace clones too (`c` defaults to the Machine's namespace, `d` names it).
        assert_eq!(
            short(&needed("team", None, &s, &BTreeMap::new())),
            [
                "create cdi.kubevirt.io/datavolumes/source in os-images golden",
                "create cdi.kubevirt.io/datavolumes/source in team local",
                "create cdi.kubevirt.io/datavolumes/source in team same",
                // A VolumeSnapshot clone: CDI asks the same right, named like the snapshot.
                "create cdi.kubevirt.io/datavolumes/source in team vmsnapshot-1-volume-root",
                "get /configmaps/ in team ca",
                "get /secrets/ in team creds",
                "get /secrets/ in team pull",
            ]
        );
    }

    /// DataSources as the shell resolved them: `media/win` points at `golden-images/win11`.
    fn resolved() -> BTreeMap<Ref, Target> {
        BTreeMap::from([(
            ("media".to_owned(), "win".to_owned()),
            Target::Pvc {
                namespace: "golden-images".into(),
                name: "win11".into(),
            },
        )])
    }

    #[test]
    fn only_new_sources_are_checked() {
        let old = spec(
            json!({"disks": [{"name": "a", "source": {"pvc": {"name": "g", "namespace": "os"}}}]}),
        );
        let same = old.clone();
        assert!(needed("team", Some(&old), &same, &BTreeMap::new()).is_empty());
        let more = spec(
            json!({"disks": [{"name": "a", "source": {"pvc": {"name": "g", "namespace": "os"}}}],
            "cdroms": [{"name": "iso", "source": {"dataSource": {"name": "win", "namespace": "media"}}}]}),
        );
        assert_eq!(
            short(&needed("team", Some(&old), &more, &resolved())),
            // A DataSource's clone is asked where it points: the PVC, by name, in its namespace.
            ["create cdi.kubevirt.io/datavolumes/source in golden-images win11"]
        );
        assert!(needed("team", None, &spec(json!({})), &BTreeMap::new()).is_empty());
        // Compared per volume: another disk's source copied onto a new disk is asked again.
        let copied = spec(json!({"disks": [
            {"name": "a", "source": {"pvc": {"name": "g", "namespace": "os"}}},
            {"name": "b", "source": {"pvc": {"name": "g", "namespace": "os"}}}]}));
        assert_eq!(
            short(&needed("team", Some(&old), &copied, &BTreeMap::new())),
            ["create cdi.kubevirt.io/datavolumes/source in os g"]
        );
    }
}
