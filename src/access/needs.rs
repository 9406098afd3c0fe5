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

/// What the guest boots or sees: its disks, CD-ROMs, boot order and cloud-init, and what its
/// `dataSource` volumes clone ([`CLONE_SOURCES_ANNOTATION`](crate::api::names::CLONE_SOURCES_ANNOTATION),
/// `/` escaped as `~1`).
pub const GUEST_FIELDS: &[&str] = &[
    "/spec/disks",
    "/spec/cdroms",
    "/spec/bootOrder",
    "/spec/cloudInit",
    "/metadata/annotations/vitistack.io~1clone-sources",
];

/// The references a Machine can carry, each yielding the permissions it needs.
pub const SOURCES: &[fn(&Change) -> Vec<Permission>] = &[
    clone_source,
    cloud_init_secret,
    disk_sources,
    adopted_claims,
];

/// Every permission the change needs from its author, in field order.
pub fn machine_needs(change: &Change) -> Vec<Permission> {
    SOURCES.iter().flat_map(|source| source(change)).collect()
}

/// `spec.cloneFrom`: the operator reads the Machine (or MachineSnapshot) named and copies it, so
/// on CREATE (the field is immutable) the author must be able to `get` it. The disks' clones are
/// asked as any `pvc` or `snapshot` clone ([`disk_sources`]): the mutating webhook has filled
/// them in (and asked `get` on a snapshot's Machine before reading it).
fn clone_source(change: &Change) -> Vec<Permission> {
    let named = |key: &str| {
        (change.new.pointer(&format!("/spec/cloneFrom/{key}")))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty() && change.old.is_none())
    };
    let machine = named("machine").map(|n| source_machine(change.namespace, n));
    let snapshot = named("snapshot").map(|n| source_snapshot(change.namespace, n));
    machine.into_iter().chain(snapshot).collect()
}

/// `get` on `resource` `name` of the vitistack.io group in `namespace`, for `field`.
fn get_source(field: &str, resource: &str, namespace: &str, name: &str) -> Permission {
    Permission {
        field: field.to_owned(),
        verb: "get".to_owned(),
        group: crate::api::names::GROUP.to_owned(),
        resource: resource.to_owned(),
        subresource: String::new(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        adopted: false,
    }
}

/// `get` on Machine `name` in `namespace`, needed by `spec.cloneFrom.machine`.
pub fn source_machine(namespace: &str, name: &str) -> Permission {
    get_source("spec.cloneFrom.machine", "machines", namespace, name)
}

/// `get` on MachineSnapshot `name` in `namespace`, needed by `spec.cloneFrom.snapshot`.
pub fn source_snapshot(namespace: &str, name: &str) -> Permission {
    get_source(
        "spec.cloneFrom.snapshot",
        "machinesnapshots",
        namespace,
        name,
    )
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

/// The clone sources of the new spec in a namespace other than the Machine's, as (field,
/// namespace), on a write that changes what the guest sees.
pub fn cross_namespace_clones(change: &Change) -> Vec<(String, String)> {
    let Some((_, new)) = change.specs() else {
        return Vec::new();
    };
    if !change.guest_affected() {
        return Vec::new();
    }
    let disks = (new.disks.iter().enumerate())
        .filter_map(|(i, d)| Some((format!("spec.disks[{i}].source"), d.source.as_ref()?)));
    let cdroms = (new.cdroms.iter().enumerate())
        .map(|(i, c)| (format!("spec.cdroms[{i}].source"), &c.source));
    disks
        .chain(cdroms)
        .flat_map(|(field, s)| {
            [
                ("pvc", s.pvc.as_ref()),
                ("dataSource", s.data_source.as_ref()),
                ("snapshot", s.snapshot.as_ref()),
            ]
            .into_iter()
            .filter_map(move |(kind, r)| {
                let ns = r?.namespace.as_deref()?;
                (ns != change.namespace)
                    .then(|| (format!("{field}.{kind}.namespace"), ns.to_owned()))
            })
            .collect::<Vec<_>>()
        })
        .collect()
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
mod tests;
