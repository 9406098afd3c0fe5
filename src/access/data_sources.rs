//! Clones through a CDI DataSource, resolved at admission. CDI clones the PVC (or snapshot) the
//! DataSource points to, in that object's namespace, with the DataVolume creator's right there,
//! and the creator is the operator: so the author is asked about what the DataSource points to,
//! not about the DataSource's namespace (a tenant who may create DataSources would otherwise
//! reach any PVC the operator may clone).
//!
//! Pure: which DataSources a spec names, and where one points given its JSON. The GET by name is
//! the shell's ([`super::review`]).

use serde_json::Value;

use crate::api::MachineSpec;
use crate::api::clone_sources::{CloneSources, PinnedSource};
use crate::api::source::ObjectRef;

/// Where a DataSource points, as CDI would clone it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pvc {
        namespace: String,
        name: String,
    },
    Snapshot {
        namespace: String,
        name: String,
    },
    /// No DataSource of that name (or CDI's API is not served).
    Missing,
    /// It names neither a PVC nor a snapshot.
    Empty,
}

impl Target {
    /// `(namespace, name, kind)` of what is cloned, if anything.
    pub fn source(&self) -> Option<(&str, &str, &'static str)> {
        match self {
            Target::Pvc { namespace, name } => Some((namespace, name, "PVC")),
            Target::Snapshot { namespace, name } => Some((namespace, name, "VolumeSnapshot")),
            Target::Missing | Target::Empty => None,
        }
    }
}

/// `(namespace, name)` of a DataSource as a Machine in `namespace` names it.
pub type Ref = (String, String);

/// The DataSources `spec` names, each once, a missing namespace meaning the Machine's.
pub fn references(namespace: &str, spec: &MachineSpec) -> Vec<Ref> {
    let disks = spec.disks.iter().filter_map(|d| d.source.as_ref());
    let cdroms = spec.cdroms.iter().map(|c| &c.source);
    let mut out: Vec<Ref> = disks
        .chain(cdroms)
        .filter_map(|s| s.data_source.as_ref())
        .map(|r| {
            let ns = r.namespace.clone().unwrap_or_else(|| namespace.to_owned());
            (ns, r.name.clone())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The `dataSource` sources of `spec` whose DataSource could not be resolved to what CDI would
/// clone, with their field (`spec.disks[0].source.dataSource`): refused, since the author's
/// right to clone cannot be asked without knowing what is cloned.
pub fn unresolved<'t>(
    namespace: &str,
    spec: &MachineSpec,
    resolved: &'t std::collections::BTreeMap<Ref, Target>,
) -> Vec<(String, Ref, Option<&'t Target>)> {
    let disks = spec.disks.iter().enumerate().filter_map(|(i, d)| {
        Some((
            format!("spec.disks[{i}].source.dataSource"),
            d.source.as_ref()?,
        ))
    });
    let cdroms = (spec.cdroms.iter().enumerate())
        .map(|(i, c)| (format!("spec.cdroms[{i}].source.dataSource"), &c.source));
    disks
        .chain(cdroms)
        .filter_map(|(field, s)| {
            let r = s.data_source.as_ref()?;
            let key = (
                r.namespace.clone().unwrap_or_else(|| namespace.to_owned()),
                r.name.clone(),
            );
            let target = resolved.get(&key);
            target
                .is_none_or(|t| t.source().is_none())
                .then_some((field, key, target))
        })
        .collect()
}

/// What each `dataSource` volume (disk or CD-ROM) of `spec` clones, as `resolved`: the pins
/// admission records. A volume whose DataSource points nowhere gets none (refused anyway).
pub fn pins(
    namespace: &str,
    spec: &MachineSpec,
    resolved: &std::collections::BTreeMap<Ref, Target>,
) -> CloneSources {
    volumes(spec)
        .filter_map(|(volume, r)| {
            let ns = r.namespace.clone().unwrap_or_else(|| namespace.to_owned());
            let pin = match resolved.get(&(ns, r.name.clone()))? {
                Target::Pvc { namespace, name } => PinnedSource::Pvc {
                    namespace: namespace.clone(),
                    name: name.clone(),
                },
                Target::Snapshot { namespace, name } => PinnedSource::Snapshot {
                    namespace: namespace.clone(),
                    name: name.clone(),
                },
                Target::Missing | Target::Empty => return None,
            };
            Some((volume.to_owned(), pin))
        })
        .collect()
}

/// The disks and CD-ROMs of `spec` that clone through a DataSource, by name.
pub fn volumes(spec: &MachineSpec) -> impl Iterator<Item = (&str, &ObjectRef)> {
    let disks = (spec.disks.iter()).filter_map(|d| Some((d.name.as_str(), d.source.as_ref()?)));
    let cdroms = (spec.cdroms.iter()).map(|c| (c.name.as_str(), &c.source));
    disks
        .chain(cdroms)
        .filter_map(|(volume, s)| Some((volume, s.data_source.as_ref()?)))
}

/// Where the DataSource in `namespace` (its JSON, `None` when there is none) points: CDI's
/// `spec.source.pvc` or `spec.source.snapshot`, whose namespace defaults to the DataSource's.
pub fn resolve(namespace: &str, data_source: Option<&Value>) -> Target {
    let Some(ds) = data_source else {
        return Target::Missing;
    };
    let pick = |kind: &str| -> Option<(String, String)> {
        let r = ds.pointer(&format!("/spec/source/{kind}"))?;
        let name = r.get("name")?.as_str().filter(|n| !n.is_empty())?;
        let ns = r
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        Some((ns.unwrap_or(namespace).to_owned(), name.to_owned()))
    };
    if let Some((namespace, name)) = pick("pvc") {
        Target::Pvc { namespace, name }
    } else if let Some((namespace, name)) = pick("snapshot") {
        Target::Snapshot { namespace, name }
    } else {
        Target::Empty
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_data_source_points_where_cdi_would_clone_from() {
        let pvc = |ns: Option<&str>| {
            let mut p = json!({"name": "golden"});
            if let Some(ns) = ns {
                p["namespace"] = json!(ns);
            }
            json!({"spec": {"source": {"pvc": p}}})
        };
        let cases = [
            (
                Some(pvc(Some("secret-images"))),
                Target::Pvc {
                    namespace: "secret-images".into(),
                    name: "golden".into(),
                },
            ),
            // Without a namespace: the DataSource's own.
            (
                Some(pvc(None)),
                Target::Pvc {
                    namespace: "team".into(),
                    name: "golden".into(),
                },
            ),
            (
                Some(json!({"spec": {"source": {"snapshot": {"name": "snap", "namespace": "s"}}}})),
                Target::Snapshot {
                    namespace: "s".into(),
                    name: "snap".into(),
                },
            ),
            (Some(json!({"spec": {"source": {}}})), Target::Empty),
            (
                Some(json!({"spec": {"source": {"pvc": {"name": ""}}}})),
                Target::Empty,
            ),
            (None, Target::Missing),
        ];
        for (ds, want) in cases {
            assert_eq!(resolve("team", ds.as_ref()), want, "{ds:?}");
        }
    }

    #[test]
    fn each_data_source_volume_is_pinned_to_what_its_data_source_points_to_now() {
        let spec: MachineSpec = serde_json::from_value(json!({
            "disks": [
                {"name": "a", "source": {"dataSource": {"name": "d"}}},
                {"name": "b", "source": {"dataSource": {"name": "gone"}}},
                {"name": "c", "source": {"pvc": {"name": "p"}}},
                {"name": "blank", "size": "1Gi"}],
            "cdroms": [{"name": "iso", "source": {"dataSource": {"name": "win", "namespace": "media"}}}]
        }))
        .expect("spec");
        let resolved = std::collections::BTreeMap::from([
            (
                ("team".to_owned(), "d".to_owned()),
                Target::Pvc {
                    namespace: "os".into(),
                    name: "debian".into(),
                },
            ),
            (("team".to_owned(), "gone".to_owned()), Target::Missing),
            (
                ("media".to_owned(), "win".to_owned()),
                Target::Snapshot {
                    namespace: "media".into(),
                    name: "win-snap".into(),
                },
            ),
        ]);
        let pins = pins("team", &spec, &resolved);
        assert_eq!(
            pins,
            CloneSources::from([
                (
                    "a".to_owned(),
                    PinnedSource::Pvc {
                        namespace: "os".into(),
                        name: "debian".into()
                    }
                ),
                (
                    "iso".to_owned(),
                    PinnedSource::Snapshot {
                        namespace: "media".into(),
                        name: "win-snap".into()
                    }
                ),
            ])
        );
    }

    #[test]
    fn each_named_data_source_once() {
        let spec: MachineSpec = serde_json::from_value(json!({
            "disks": [
                {"name": "a", "source": {"dataSource": {"name": "d"}}},
                {"name": "b", "source": {"dataSource": {"name": "d", "namespace": "team"}}},
                {"name": "c", "source": {"pvc": {"name": "p"}}}],
            "cdroms": [{"name": "iso", "source": {"dataSource": {"name": "win", "namespace": "media"}}}]
        }))
        .expect("spec");
        assert_eq!(
            references("team", &spec),
            [
                ("media".to_owned(), "win".to_owned()),
                ("team".to_owned(), "d".to_owned())
            ]
        );
    }
}
