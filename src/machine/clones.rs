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
//! `gpus` and `hostDevices` (the class's). The VM's firmware UUID is KubeVirt's, derived from the
//! VM's name, so a clone (another name) gets its own.

use crate::api::MachineSpec;
use crate::api::clone_from::CloneFrom;
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
}

/// `spec.cloneFrom` and its fields, as errors name them.
const FROM: &str = "spec.cloneFrom";
const FROM_MACHINE: &str = "spec.cloneFrom.machine";

/// The rules on `spec.cloneFrom` itself: exactly one source, named like a Kubernetes object.
pub fn errors(spec: &MachineSpec) -> Vec<FieldError> {
    let Some(from) = &spec.clone_from else {
        return Vec::new();
    };
    let path = FieldPath::new(FROM_MACHINE);
    let Some(machine) = from.machine() else {
        return vec![FieldError::required(
            &path,
            "the Machine to clone, in this namespace",
        )];
    };
    dns1123_subdomain(machine)
        .into_iter()
        .map(|m| FieldError::invalid(&path, machine, m))
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

/// The source the new Machine's `spec.cloneFrom` names, if any.
pub fn source_of(spec: &MachineSpec) -> Option<&str> {
    spec.clone_from.as_ref().and_then(CloneFrom::machine)
}

/// The new Machine `new` (namespace-local clone of `source`), as its author wrote it, filled from
/// the source; or why it cannot be. `cluster` is the KubevirtConfig the new Machine is placed
/// on. Idempotent: filling a filled spec again changes nothing.
pub fn fill(
    source: &SourceMachine,
    new: &MachineSpec,
    cluster: Option<&str>,
) -> Result<MachineSpec, Vec<FieldError>> {
    let field = FieldPath::new(FROM_MACHINE);
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

/// What a disk of the source is cloned from: its claim, in the namespace of both Machines.
fn clone_source(source: &str, disk: &str) -> DiskSource {
    DiskSource {
        pvc: Some(ObjectRef {
            name: pvc_name(source, disk),
            namespace: None,
        }),
        ..DiskSource::default()
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
        .map(|d| {
            let wanted = clone_source(source.name, &d.name);
            let Some((i, own)) = mine.iter().enumerate().find(|(_, m)| m.name == d.name) else {
                return Disk {
                    source: Some(wanted),
                    ..d.clone()
                };
            };
            if own.source.as_ref().is_some_and(|s| *s != wanted) {
                errors.push(FieldError::forbidden(
                    &path.index(i).child("source"),
                    format!(
                        "disk {:?} is a clone of the claim {} of Machine {} (spec.cloneFrom): \
                         leave its source unset, or give the disk another name",
                        d.name,
                        pvc_name(source.name, &d.name),
                        source.name
                    ),
                ));
            }
            Disk {
                name: d.name.clone(),
                size: own.size.clone().or_else(|| d.size.clone()),
                storage_class: own
                    .storage_class
                    .clone()
                    .or_else(|| d.storage_class.clone()),
                access_mode: own.access_mode.clone().or_else(|| d.access_mode.clone()),
                volume_mode: own.volume_mode.clone().or_else(|| d.volume_mode.clone()),
                source: Some(wanted),
            }
        })
        .collect();
    let theirs = |name: &str| source.spec.disks.iter().any(|d| d.name == name);
    out.extend(mine.iter().filter(|d| !theirs(&d.name)).cloned());
    (out, errors)
}

#[cfg(test)]
mod tests;
