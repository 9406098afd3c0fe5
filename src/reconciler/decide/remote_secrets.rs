//! The credentials of a remote Machine's disk sources (pure): the Secret a CDI `http` or
//! `registry` source names (`secretRef`) and the ConfigMap of an `http` source's CA
//! (`certConfigMap`) live in the Machine's namespace on the management cluster, where the author
//! was asked `get` on them. CDI reads them in the DataVolume's namespace on the remote cluster,
//! so the operator copies each one there, under a name of its own made from the DataVolume's
//! (`<machine>-<disk>-credentials`, `<machine>-<disk>-ca`), proven for the Machine like
//! everything else it makes, and points the DataVolume it makes at the copy. A copy follows its
//! source at each reconcile and goes with the Machine. An object of that name without the proof
//! is never written (`SecretConflict`, `ConfigMapConflict`), and a DataVolume naming it is not
//! made: CDI would send those credentials to the author's URL.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use super::ownership::{MachineRef, Ownership, Verdicts};
use super::problem::{Kind, Problem};
use crate::api::machine::Disk;
use crate::api::names::pvc_name;
use crate::api::source::{Cdrom, DiskSource};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::{MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL};

/// What a disk source names for CDI to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Credential {
    /// `http.secretRef` or `registry.secretRef`.
    Secret,
    /// `http.certConfigMap`.
    ConfigMap,
}

impl Credential {
    /// The kind named in a conflict.
    pub fn kind(self) -> Kind {
        match self {
            Credential::Secret => Kind::Secret,
            Credential::ConfigMap => Kind::ConfigMap,
        }
    }
}

/// One copy a remote Machine needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub what: Credential,
    /// The DataVolume that reads it.
    pub data_volume: String,
    /// The object's name in the Machine's namespace on the management cluster.
    pub source: String,
    /// The copy's name on the remote cluster.
    pub copy: String,
}

/// The copy's name for the DataVolume `data_volume`.
pub fn copy_name(data_volume: &str, what: Credential) -> String {
    match what {
        Credential::Secret => format!("{data_volume}-credentials"),
        Credential::ConfigMap => format!("{data_volume}-ca"),
    }
}

/// Every copy the sources of `machine`'s disks and CD-ROMs ask for.
pub fn wanted_copies(machine: &str, disks: &[Disk], cdroms: &[Cdrom]) -> Vec<Wanted> {
    let sources = (disks.iter())
        .filter_map(|d| d.source.as_ref().map(|s| (d.name.as_str(), s)))
        .chain(cdroms.iter().map(|c| (c.name.as_str(), &c.source)));
    let mut out = Vec::new();
    for (disk, source) in sources {
        let data_volume = pvc_name(machine, disk);
        for (what, name) in credentials(source) {
            out.push(Wanted {
                what,
                copy: copy_name(&data_volume, what),
                data_volume: data_volume.clone(),
                source: name.to_owned(),
            });
        }
    }
    out
}

/// The names a remote Machine's credential copies may have, each DataVolume's Secret and
/// ConfigMap (whether or not its source names one now): what its deletion looks for.
pub fn copies(machine: &str, spec: &crate::api::MachineSpec) -> Vec<(Kind, String)> {
    let data_volumes: std::collections::BTreeSet<String> =
        wanted_copies(machine, &spec.disks, &spec.cdroms)
            .into_iter()
            .map(|w| w.data_volume)
            .collect();
    copies_of(&data_volumes)
}

/// The names the copies the DataVolumes `data_volumes` read may have.
pub fn copies_of<S: AsRef<str>>(data_volumes: impl IntoIterator<Item = S>) -> Vec<(Kind, String)> {
    (data_volumes.into_iter())
        .flat_map(|dv| {
            [Credential::Secret, Credential::ConfigMap]
                .map(|what| (what.kind(), copy_name(dv.as_ref(), what)))
        })
        .collect()
}

fn credentials(source: &DiskSource) -> Vec<(Credential, &str)> {
    let http = source.http.as_ref();
    let secrets = (http.and_then(|h| h.secret_ref.as_ref()))
        .into_iter()
        .chain(source.registry.as_ref().and_then(|r| r.secret_ref.as_ref()))
        .map(|r| (Credential::Secret, r.name.as_str()));
    let ca = (http.and_then(|h| h.cert_config_map.as_deref())).map(|c| (Credential::ConfigMap, c));
    secrets.chain(ca).collect()
}

/// Points each DataVolume of `dvs` that is not made yet (`made` says which are) at the copies
/// `wanted` names for it. One already made keeps its source (CDI refuses a change).
pub fn point_at_copies(dvs: &mut [DataVolume], wanted: &[Wanted], made: impl Fn(&str) -> bool) {
    for dv in dvs {
        let name = dv.metadata.name.clone().unwrap_or_default();
        let Some(source) = dv.spec.source.as_mut().filter(|_| !made(&name)) else {
            continue;
        };
        for w in wanted.iter().filter(|w| w.data_volume == name) {
            let copy = Some(w.copy.clone());
            match w.what {
                Credential::Secret => {
                    if let Some(h) = source.http.as_mut().filter(|h| h.secret_ref.is_some()) {
                        h.secret_ref = copy.clone();
                    }
                    if let Some(r) = source.registry.as_mut().filter(|r| r.secret_ref.is_some()) {
                        r.secret_ref = copy;
                    }
                }
                Credential::ConfigMap => {
                    if let Some(h) = source.http.as_mut() {
                        h.cert_config_map = copy;
                    }
                }
            }
        }
    }
}

/// Whether the DataVolume `dv` names the copy `w`.
pub fn names_copy(dv: &DataVolume, w: &Wanted) -> bool {
    let Some(source) = dv.spec.source.as_ref() else {
        return false;
    };
    let copy = Some(&w.copy);
    let http = source.http.as_ref();
    match w.what {
        Credential::Secret => {
            http.is_some_and(|h| h.secret_ref.as_ref() == copy)
                || (source.registry.as_ref()).is_some_and(|r| r.secret_ref.as_ref() == copy)
        }
        Credential::ConfigMap => http.is_some_and(|h| h.cert_config_map.as_ref() == copy),
    }
}

/// A copy's source on the management cluster and the object of the copy's name on the remote
/// cluster, as observe read them (whole: a copy is made of its source's data).
#[derive(Clone, Debug, PartialEq)]
pub enum Found {
    Secret {
        source: Option<Secret>,
        live: Option<Secret>,
    },
    ConfigMap {
        source: Option<ConfigMap>,
        live: Option<ConfigMap>,
    },
}

impl Found {
    /// The object found under the copy's name: what its ownership is judged on.
    pub fn live(&self) -> Option<&ObjectMeta> {
        match self {
            Found::Secret { live, .. } => live.as_ref().map(|s| &s.metadata),
            Found::ConfigMap { live, .. } => live.as_ref().map(|c| &c.metadata),
        }
    }
}

/// A copy to write, and the object of its name found there (what drift is judged against).
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Secret {
        copy: Secret,
        live: Option<Secret>,
    },
    ConfigMap {
        copy: ConfigMap,
        live: Option<ConfigMap>,
    },
}

/// What to do about one copy.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<K> {
    /// Make it, or make it what the source holds now.
    Write(K),
    /// Someone else's object of that name: not written, and its DataVolume not made.
    Conflict,
    /// The source is gone from the management cluster: nothing written (CDI waits).
    SourceMissing,
}

impl<K> Step<K> {
    /// The same step, with what is written as `f` makes it.
    fn write_as(self, f: impl FnOnce(K) -> Write) -> Step<Write> {
        match self {
            Step::Write(k) => Step::Write(f(k)),
            Step::Conflict => Step::Conflict,
            Step::SourceMissing => Step::SourceMissing,
        }
    }
}

/// The kinds copied, and what a copy takes of its source.
pub trait Copied: Resource<DynamicType = ()> + Sized {
    /// `source`'s content under `metadata`.
    fn copy_of(source: &Self, metadata: ObjectMeta) -> Self;
}

impl Copied for Secret {
    fn copy_of(source: &Secret, metadata: ObjectMeta) -> Secret {
        Secret {
            metadata,
            data: source.data.clone(),
            type_: source.type_.clone(),
            ..Secret::default()
        }
    }
}

impl Copied for ConfigMap {
    fn copy_of(source: &ConfigMap, metadata: ObjectMeta) -> ConfigMap {
        ConfigMap {
            metadata,
            data: source.data.clone(),
            binary_data: source.binary_data.clone(),
            ..ConfigMap::default()
        }
    }
}

/// The copy of `source` as `w` for `machine` (in `namespace`), the object of that name found
/// there judged `verdict`.
pub fn copy_step<K: Copied>(
    w: &Wanted,
    (machine, namespace): (MachineRef, &str),
    source: Option<&K>,
    verdict: Ownership,
) -> Step<K> {
    // A copy is never adopted: released or not, only one proven for this Machine is ours.
    if !verdict.writable(false) {
        return Step::Conflict;
    }
    source.map_or(Step::SourceMissing, |s| {
        Step::Write(K::copy_of(s, meta(w, machine, namespace)))
    })
}

/// What `decide` makes of a remote Machine's copies.
#[derive(Debug, Default)]
pub struct Copies {
    /// Written before the DataVolumes that read them.
    pub writes: Vec<(Wanted, Write)>,
    /// Someone else's object under a copy's name: `SecretConflict`, `ConfigMapConflict`.
    pub conflicts: Vec<Problem>,
}

/// Points the DataVolumes `dvs` not made yet (`made` says which are) at their copies, and
/// decides each copy they read from what observe `found` and judged (`verdicts`), for the
/// Machine `at`: a DataVolume naming a copy in conflict is taken out of `dvs` (not written).
pub fn decide_copies(
    dvs: &mut Vec<DataVolume>,
    (found, verdicts): (&[(Wanted, Found)], &Verdicts),
    at: (MachineRef, &str),
    made: impl Fn(&str) -> bool,
) -> Copies {
    let wanted: Vec<Wanted> = found.iter().map(|(w, _)| w.clone()).collect();
    point_at_copies(dvs, &wanted, made);
    let named: Vec<&(Wanted, Found)> = (found.iter())
        .filter(|(w, _)| dvs.iter().any(|dv| names_copy(dv, w)))
        .collect();
    let (mut out, mut held) = (Copies::default(), Vec::new());
    for (w, f) in named {
        let verdict = verdicts.copy(&w.copy);
        let step = match f {
            Found::Secret { source, live } => {
                copy_step(w, at, source.as_ref(), verdict).write_as(|copy| Write::Secret {
                    copy,
                    live: live.clone(),
                })
            }
            Found::ConfigMap { source, live } => copy_step(w, at, source.as_ref(), verdict)
                .write_as(|copy| Write::ConfigMap {
                    copy,
                    live: live.clone(),
                }),
        };
        match step {
            Step::Write(write) => out.writes.push((w.clone(), write)),
            Step::Conflict => {
                let (kind, name) = (w.what.kind(), w.copy.clone());
                out.conflicts.push(Problem::Conflict { kind, name });
                held.push(w.data_volume.clone());
            }
            // CDI waits for the copy; observe said so (the author was asked `get` on it).
            Step::SourceMissing => {}
        }
    }
    dvs.retain(|dv| !held.iter().any(|h| Some(h) == dv.metadata.name.as_ref()));
    out
}

fn meta(w: &Wanted, machine: MachineRef, namespace: &str) -> ObjectMeta {
    let labels = [
        (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
        (MACHINE_LABEL.to_owned(), machine.name.to_owned()),
    ];
    ObjectMeta {
        name: Some(w.copy.clone()),
        namespace: Some(namespace.to_owned()),
        labels: Some(BTreeMap::from(labels)),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests;
