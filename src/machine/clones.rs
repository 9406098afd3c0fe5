//! Clones (`spec.cloneFrom`), pure: what a new Machine made from another one of its namespace
//! is, given the source as stored; the rules on the field. The mutating webhook reads the
//! source as the author may (`crate::admission::clones`) and stores what [`fill`] returns.
//!
//! What is taken from the source, and only where the new Machine leaves it unset:
//! - every disk, same name, size, class and modes, as a CDI clone of the source's claim
//!   `<source>-<disk>` (`source.pvc`): the validating webhook then asks the author CDI's clone
//!   right on each claim, and the reconciler makes the clone DataVolumes, as for any `pvc` disk;
//! - `template`, `resources`, `bootOrder`, `domain`, `evictionStrategy`, `placement`,
//!   `updateStrategy`, `cloudInit` without its `networkData` (which may spell addresses);
//! - `networks`, each without its `macAddress` and `addresses`: the webhook gives the clone
//!   fresh ones, never the source's.
//!
//! Never taken: `running` and `runStrategy` (the new Machine's: `Halted` lets it be re-addressed
//! before its first boot), CD-ROMs (installer media), `snapshots` (a schedule is per Machine),
//! `gpus` and `hostDevices` (the class's). The firmware UUID is never written: KubeVirt gives
//! the clone's VM, a new VM, one of its own.

use std::collections::BTreeMap;

use crate::api::MachineSpec;
use crate::api::clone_from::{CloneFrom, Named};
use crate::api::machine::{Disk, Network};
use crate::api::names::pvc_name;
use crate::api::source::{DiskSource, ObjectRef};

use super::field_error::{FieldError, FieldPath};
use super::names::dns1123_subdomain;

/// The source Machine as the webhook read it.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceMachine<'a> {
    pub name: &'a str,
    pub spec: &'a MachineSpec,
    /// The KubevirtConfig it is placed on; none: the operator's own cluster.
    pub cluster: Option<&'a str>,
    /// What each of its disks is cloned from.
    pub copies: Copies<'a>,
}

/// What the disks of a clone are cloned from.
#[derive(Clone, Debug, PartialEq)]
pub enum Copies<'a> {
    /// The source Machine's claims, `<machine>-<disk>` (`spec.cloneFrom.machine`).
    Claims,
    /// The VolumeSnapshot of each disk (volume name to VolumeSnapshot) in the MachineSnapshot
    /// `snapshot` (`spec.cloneFrom.snapshot`).
    Snapshot {
        snapshot: &'a str,
        volumes: &'a BTreeMap<String, String>,
    },
}

/// `spec.cloneFrom` and its fields, as errors name them.
pub const FROM: &str = "spec.cloneFrom";
pub const FROM_MACHINE: &str = "spec.cloneFrom.machine";
pub const FROM_SNAPSHOT: &str = "spec.cloneFrom.snapshot";

/// The rules on `spec.cloneFrom` itself: exactly one source, named like a Kubernetes object.
pub fn errors(spec: &MachineSpec) -> Vec<FieldError> {
    let Some(from) = &spec.clone_from else {
        return Vec::new();
    };
    let (field, name) = match (&from.machine, &from.snapshot) {
        (Some(m), None) => (FROM_MACHINE, m),
        (None, Some(s)) => (FROM_SNAPSHOT, s),
        (None, None) => {
            return vec![FieldError::required(
                &FieldPath::new(FROM),
                "exactly one of machine (a Machine) or snapshot (a MachineSnapshot) in this \
                 namespace",
            )];
        }
        (Some(_), Some(_)) => {
            return vec![FieldError::forbidden(
                &FieldPath::new(FROM),
                "exactly one of machine or snapshot may be set, found both",
            )];
        }
    };
    let path = FieldPath::new(field);
    dns1123_subdomain(name)
        .into_iter()
        .map(|m| FieldError::invalid(&path, name.as_str(), m))
        .collect()
}

/// `spec.cloneFrom` never changes after create: the disks were made from that source once.
pub fn update_errors(old: &MachineSpec, new: &MachineSpec) -> Vec<FieldError> {
    if old.clone_from == new.clone_from {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        &FieldPath::new(FROM),
        "is immutable: the Machine was made from its source when it was created",
    )]
}

/// The source the new Machine's `spec.cloneFrom` names, if exactly one.
pub fn source_of(spec: &MachineSpec) -> Option<Named<'_>> {
    spec.clone_from.as_ref().and_then(CloneFrom::named)
}

/// The new Machine `new` (namespace-local clone of `source`), as its author wrote it, filled from
/// the source; or why it cannot be. `cluster` is the KubevirtConfig the new Machine is placed
/// on. Idempotent: filling a filled spec again changes nothing.
pub fn fill(
    source: &SourceMachine,
    new: &MachineSpec,
    cluster: Option<&str>,
) -> Result<MachineSpec, Vec<FieldError>> {
    let field = FieldPath::new(match source.copies {
        Copies::Claims => FROM_MACHINE,
        Copies::Snapshot { .. } => FROM_SNAPSHOT,
    });
    if let Some(remote) = source.cluster {
        return Err(vec![FieldError::forbidden(
            &field,
            format!(
                "Machine {} runs on the cluster of KubevirtConfig {remote}: a clone is made \
                 only from a Machine of the operator's own cluster (its claims are there)",
                source.name
            ),
        )]);
    }
    if let Some(remote) = cluster {
        return Err(vec![FieldError::forbidden(
            &FieldPath::new(FROM),
            format!(
                "this Machine is placed on the cluster of KubevirtConfig {remote}: a clone is \
                 made only on the operator's own cluster, where the source's claims are"
            ),
        )]);
    }
    let (disks, errors) = disks(source, &new.disks);
    if !errors.is_empty() {
        return Err(errors);
    }
    let from = source.spec;
    Ok(MachineSpec {
        template: or(&new.template, &from.template),
        resources: or(&new.resources, &from.resources),
        disks,
        networks: if new.networks.is_empty() {
            from.networks.iter().map(fresh_network).collect()
        } else {
            new.networks.clone()
        },
        boot_order: if new.boot_order.is_empty() {
            from.boot_order.clone()
        } else {
            new.boot_order.clone()
        },
        cloud_init: new.cloud_init.clone().or_else(|| {
            from.cloud_init.clone().map(|mut c| {
                c.network_data = None;
                c
            })
        }),
        domain: or(&new.domain, &from.domain),
        eviction_strategy: or(&new.eviction_strategy, &from.eviction_strategy),
        placement: or(&new.placement, &from.placement),
        update_strategy: or(&new.update_strategy, &from.update_strategy),
        ..new.clone()
    })
}

/// Mine, else theirs.
fn or<T: Clone>(mine: &Option<T>, theirs: &Option<T>) -> Option<T> {
    mine.clone().or_else(|| theirs.clone())
}

/// An interface of the source without its identity: the webhook assigns MAC and addresses.
fn fresh_network(n: &Network) -> Network {
    Network {
        mac_address: None,
        addresses: Vec::new(),
        ..n.clone()
    }
}

/// What disk `disk` of the source is cloned from (in the namespace of both Machines): its claim,
/// or its VolumeSnapshot in the MachineSnapshot; `Err` names what is missing.
fn clone_source(source: &SourceMachine, disk: &str) -> Result<DiskSource, String> {
    let local = |name: String| ObjectRef {
        name,
        namespace: None,
    };
    match &source.copies {
        Copies::Claims => Ok(DiskSource {
            pvc: Some(local(pvc_name(source.name, disk))),
            ..DiskSource::default()
        }),
        Copies::Snapshot { snapshot, volumes } => match volumes.get(disk) {
            Some(v) => Ok(DiskSource {
                snapshot: Some(local(v.clone())),
                ..DiskSource::default()
            }),
            None => Err(format!(
                "MachineSnapshot {snapshot} holds no copy of disk {disk:?} of Machine {}",
                source.name
            )),
        },
    }
}

/// What disk `disk` is cloned from, described for a refusal.
fn described(s: &DiskSource) -> String {
    match (&s.pvc, &s.snapshot) {
        (Some(p), _) => format!("the claim {}", p.name),
        (_, Some(v)) => format!("the VolumeSnapshot {}", v.name),
        _ => "its source".to_owned(),
    }
}

/// Every disk of the source as a clone (a disk of the new Machine of its name may set its size,
/// class and modes, not another source), then the new Machine's other disks.
fn disks(source: &SourceMachine, mine: &[Disk]) -> (Vec<Disk>, Vec<FieldError>) {
    let mut errors = Vec::new();
    let spec = FieldPath::new("spec");
    let path = spec.child("disks");
    let mut out: Vec<Disk> = source
        .spec
        .disks
        .iter()
        .filter_map(|d| {
            let wanted = match clone_source(source, &d.name) {
                Ok(wanted) => wanted,
                Err(why) => {
                    let field = FieldPath::new(FROM_SNAPSHOT);
                    errors.push(FieldError::forbidden(&field, why));
                    return None;
                }
            };
            let Some((i, own)) = mine.iter().enumerate().find(|(_, m)| m.name == d.name) else {
                return Some(Disk {
                    source: Some(wanted),
                    ..d.clone()
                });
            };
            if own.source.as_ref().is_some_and(|s| *s != wanted) {
                errors.push(FieldError::forbidden(
                    &path.index(i).child("source"),
                    format!(
                        "disk {:?} is a clone of {} of Machine {} (spec.cloneFrom): leave its \
                         source unset, or give the disk another name",
                        d.name,
                        described(&wanted),
                        source.name
                    ),
                ));
            }
            Some(Disk {
                name: d.name.clone(),
                size: or(&own.size, &d.size),
                storage_class: or(&own.storage_class, &d.storage_class),
                access_mode: or(&own.access_mode, &d.access_mode),
                volume_mode: or(&own.volume_mode, &d.volume_mode),
                source: Some(wanted),
            })
        })
        .collect();
    let theirs = |name: &str| source.spec.disks.iter().any(|d| d.name == name);
    out.extend(mine.iter().filter(|d| !theirs(&d.name)).cloned());
    (out, errors)
}

#[cfg(test)]
mod tests;
