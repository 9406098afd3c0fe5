//! A remote Machine's `dataSource` clones, resolved on its own cluster (pure; table tests in
//! `remote_clones/tests.rs`).
//!
//! Admission pins a local Machine's DataSources (`crate::admission::pins`); a remote Machine's
//! DataSource that counts is on its cluster, which the webhook cannot read, so the webhook asks
//! its author CDI's clone right for any PVC of the namespace (the mirror model,
//! `crate::access::placement`) and pins nothing. The leader reads each DataSource there, in
//! the namespace named like the Machine's, while the DataVolume of its volume is not made yet,
//! and writes what it points to into that DataVolume (`spec.source.pvc` or `.snapshot`): CDI
//! refuses any change of a made DataVolume's source and `disks::decide` keeps it, so that is
//! the pin. A DataSource missing there, not Ready, naming no source, or in (or pointing at)
//! another namespace without the KubevirtConfig's `allowCrossNamespaceClones` makes nothing
//! for its volume: a [`Problem::DataSourceUnusable`] naming the field.

use std::collections::BTreeMap;

use crate::access::data_sources::{Ref, Target};
use crate::api::MachineSpec;
use crate::api::clone_sources::{self, CloneSources, PinnedSource};
use crate::api::source::ObjectRef;

use super::desired::meta::pvc_name;
use super::problem::{DataSourceFault, Problem};

/// A DataSource as read on the remote cluster: where it points ([`Target::Missing`] when there
/// is none) and whether its `Ready` condition is True.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub target: Target,
    pub ready: bool,
}

/// What observe read for a remote Machine's clones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The KubevirtConfig's name.
    pub cluster: String,
    /// Its `allowCrossNamespaceClones`.
    pub allow_cross_namespace_clones: bool,
    /// Each DataSource [`to_read`] named, as read there.
    pub data_sources: BTreeMap<Ref, Seen>,
}

/// The pins to clone from, and why the other volumes get nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub pins: CloneSources,
    pub problems: Vec<Problem>,
}

/// Each `dataSource` volume of `spec`: its field, its name and its DataSource reference.
fn volumes(spec: &MachineSpec) -> impl Iterator<Item = (String, &str, &ObjectRef)> {
    let disks = spec.disks.iter().enumerate().filter_map(|(i, d)| {
        let r = d.source.as_ref()?.data_source.as_ref()?;
        Some((
            format!("spec.disks[{i}].source.dataSource"),
            d.name.as_str(),
            r,
        ))
    });
    let cdroms = spec.cdroms.iter().enumerate().filter_map(|(i, c)| {
        let r = c.source.data_source.as_ref()?;
        Some((
            format!("spec.cdroms[{i}].source.dataSource"),
            c.name.as_str(),
            r,
        ))
    });
    disks.chain(cdroms)
}

/// The DataSources to read for Machine `machine` in `namespace`: those of its `dataSource`
/// volumes whose DataVolume is not `made` yet (a made one keeps its source), each once.
pub fn to_read(
    namespace: &str,
    machine: &str,
    spec: &MachineSpec,
    made: impl Fn(&str) -> bool,
) -> Vec<Ref> {
    let mut out: Vec<Ref> = volumes(spec)
        .filter(|(_, volume, _)| !made(&pvc_name(machine, volume)))
        .map(|(_, _, r)| {
            let ns = r.namespace.clone().unwrap_or_else(|| namespace.to_owned());
            (ns, r.name.clone())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What each `dataSource` volume of `spec` (a Machine in `namespace`) clones, as `found` on its
/// cluster; a volume whose DataSource was not read (its DataVolume is made) gets neither.
pub fn resolve(namespace: &str, spec: &MachineSpec, found: &Found) -> Resolved {
    let mut out = Resolved::default();
    for (field, volume, r) in volumes(spec) {
        let ds_ns = r.namespace.clone().unwrap_or_else(|| namespace.to_owned());
        let key = (ds_ns, r.name.clone());
        let Some(seen) = found.data_sources.get(&key) else {
            continue;
        };
        match judge(namespace, &key.0, seen, found.allow_cross_namespace_clones) {
            Ok(pin) => {
                out.pins.insert(volume.to_owned(), pin);
            }
            Err(fault) => out.problems.push(Problem::DataSourceUnusable {
                field,
                data_source: format!("{}/{}", key.0, key.1),
                cluster: found.cluster.clone(),
                fault,
            }),
        }
    }
    out
}

/// What each `dataSource` volume clones, resolved once, when observed: a remote Machine's as
/// `found` on its cluster, with why a volume gets none; a local one's pins from admission (its
/// `annotations`; unreadable ones pin nothing: each such volume not yet made says so).
pub fn pins(
    annotations: Option<&BTreeMap<String, String>>,
    namespace: &str,
    spec: &MachineSpec,
    found: Option<&Found>,
) -> Resolved {
    match found {
        Some(found) => resolve(namespace, spec, found),
        None => Resolved {
            pins: clone_sources::read(annotations).unwrap_or_default(),
            problems: Vec::new(),
        },
    }
}

/// Whether a DataSource (its JSON) says CDI's `Ready` condition is True.
pub fn ready(data_source: &serde_json::Value) -> bool {
    let conditions = data_source.pointer("/status/conditions");
    (conditions.and_then(serde_json::Value::as_array)).is_some_and(|cs| {
        cs.iter().any(|c| {
            c.get("type") == Some(&"Ready".into()) && c.get("status") == Some(&"True".into())
        })
    })
}

/// One DataSource in `ds_namespace`, for a Machine in `namespace`.
fn judge(
    namespace: &str,
    ds_namespace: &str,
    seen: &Seen,
    allow_cross: bool,
) -> Result<PinnedSource, DataSourceFault> {
    let (pin, target_ns) = match &seen.target {
        Target::Missing => return Err(DataSourceFault::Missing),
        Target::Empty => return Err(DataSourceFault::NoSource),
        Target::Pvc { namespace, name } => (
            PinnedSource::Pvc {
                namespace: namespace.clone(),
                name: name.clone(),
            },
            namespace,
        ),
        Target::Snapshot { namespace, name } => (
            PinnedSource::Snapshot {
                namespace: namespace.clone(),
                name: name.clone(),
            },
            namespace,
        ),
    };
    if !allow_cross {
        // The DataSource's own namespace first: its author reached into it.
        let elsewhere = [ds_namespace, target_ns.as_str()]
            .into_iter()
            .find(|ns| *ns != namespace);
        if let Some(other) = elsewhere {
            return Err(DataSourceFault::CrossNamespace {
                namespace: other.to_owned(),
            });
        }
    }
    if !seen.ready {
        return Err(DataSourceFault::NotReady);
    }
    Ok(pin)
}

#[cfg(test)]
mod tests;
