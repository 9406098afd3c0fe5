//! The disks' part of the decision (pure): which claims and DataVolumes may be written, which
//! are adopted, which must be released for `retain-disks`, and which of CDI's claims grow.
//!
//! - A claim or DataVolume is written only when it is absent, ours, or released by us for a
//!   Machine of this name (adopted; the write that adopts it carries the new proof, so an
//!   adoption that fails leaves it released, never ours).
//! - `retain-disks` is its own step: every claim and DataVolume of ours that still carries an
//!   owner reference to the Machine is released with a metadata-only patch, whatever else fails.
//! - CDI never adopts for us: no DataVolume is written while a claim of its name exists that CDI
//!   did not make for that very DataVolume ([`filled_for`]).
//! - CDI refuses any change of a DataVolume's spec, so a grown disk or CD-ROM grows the claim
//!   CDI made, and the DataVolume keeps the size it was made with.

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::api::Quantity;
use crate::reconciler::apis::cdi::{DataVolume, filled_for};
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::ownership::{self, MachineRef, Ownership};
use crate::reconciler::decide::problem::{Kind, Problem};
use crate::reconciler::decide::volumes::SourcedVolume;
use crate::reconciler::observe::Observed;

/// An object of ours to free of the Machine's owner references (metadata only).
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub kind: Kind,
    pub name: String,
    /// Its owner references without the Machine's.
    pub owners: Vec<OwnerReference>,
    /// The version they were read at: a concurrent change is a conflict, retried.
    pub resource_version: Option<String>,
}

/// The release `meta`'s object needs, if it references the Machine with uid `machine_uid`.
pub fn release_of(kind: Kind, meta: &ObjectMeta, machine_uid: Option<&str>) -> Option<Release> {
    let uid = machine_uid?;
    let refs = meta.owner_references.as_deref().unwrap_or_default();
    if !refs.iter().any(|r| r.uid == uid) {
        return None;
    }
    Some(Release {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        owners: refs.iter().filter(|r| r.uid != uid).cloned().collect(),
        resource_version: meta.resource_version.clone(),
    })
}

/// What cleanup does with one of the Machine's claims or DataVolumes.
#[derive(Clone, Debug, PartialEq)]
pub enum Fate {
    /// Kept: released first when it still references the Machine.
    Keep(Option<Release>),
    Delete,
}

/// The fate of an object of ours at cleanup: a disk's stays under `keep` (retain-disks or an
/// orphan deletion), and so does one that no longer references the Machine at all (the garbage
/// collector orphaned it before the cleanup ran, or an admin freed it); a CD-ROM's goes.
pub fn fate(keep: bool, disk: bool, release: Option<Release>) -> Fate {
    match (disk, keep, release) {
        (false, _, _) => Fate::Delete,
        (true, true, release) => Fate::Keep(release),
        (true, false, None) => Fate::Keep(None),
        (true, false, Some(_)) => Fate::Delete,
    }
}

/// What the disks' part decided.
#[derive(Debug, Default)]
pub struct Disks {
    pub claims: Vec<PersistentVolumeClaim>,
    pub data_volumes: Vec<DataVolume>,
    pub release: Vec<Release>,
    /// CDI's claims to grow: (claim name, new size).
    pub grow: Vec<(String, String)>,
    /// Released objects the writes adopt (each gets an Event once adopted).
    pub adopting: Vec<(Kind, String)>,
    pub problems: Vec<Problem>,
}

fn requested(
    storage: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) -> Option<String> {
    storage.and_then(|r| r.get("storage")).map(|q| q.0.clone())
}

fn dv_size(dv: &DataVolume) -> Option<&String> {
    dv.spec
        .storage
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .get("storage")
}

fn set_dv_size(dv: &mut DataVolume, size: Option<&String>) {
    let requests = dv
        .spec
        .storage
        .as_mut()
        .and_then(|s| s.resources.as_mut())
        .map(|r| &mut r.requests);
    match (requests, size) {
        (Some(r), Some(size)) => {
            r.insert("storage".to_owned(), size.clone());
        }
        (Some(r), None) => {
            r.remove("storage");
        }
        (None, _) => {}
    }
}

/// Whether `want` is larger than `have` (both quantities; unparsable: no).
fn larger(want: &str, have: &str) -> bool {
    Quantity::from(want).compare(&Quantity::from(have)) == Some(Ordering::Greater)
}

/// The disks' part of the decision for `o`, given the desired claims (blank disks) and
/// DataVolumes (disks with a source, CD-ROMs).
pub fn decide(
    o: &Observed,
    key: &OwnershipKey,
    retain: bool,
    sourced: &[SourcedVolume],
    claims: Vec<PersistentVolumeClaim>,
    data_volumes: Vec<DataVolume>,
) -> Disks {
    let machine = MachineRef::of(&o.machine);
    let mut out = Disks::default();
    for mut claim in claims {
        let name = claim.name_any();
        let live = o.claims.get(&name);
        let owner = ownership::of(live, machine, key);
        if !owner.writable(true) {
            out.problems.push(conflict(Kind::Claim, name));
            continue;
        }
        if retain {
            // No reference the garbage collector acts on: no deletion path can take the claim.
            claim.metadata.owner_references = None;
            out.release.extend(
                live.filter(|_| owner == Ownership::Ours)
                    .and_then(|l| release_of(Kind::Claim, l.meta(), machine.uid)),
            );
        }
        if owner == Ownership::Released {
            out.adopting.push((Kind::Claim, name));
        }
        out.claims.push(claim);
    }
    for mut dv in data_volumes {
        let name = dv.name_any();
        let live = o.data_volumes.get(&name);
        let owner = ownership::of(live, machine, key);
        if !owner.writable(true) {
            out.problems.push(conflict(Kind::DataVolume, name));
            continue;
        }
        let claim = o.claims.get(&name);
        let live_uid = live.and_then(|d| d.meta().uid.as_deref());
        match (claim, live_uid) {
            (Some(c), Some(uid)) if filled_for(c.meta(), uid) => {}
            // A claim of its name that CDI did not make for it: CDI must never adopt it.
            (Some(_), _) => {
                out.problems.push(conflict(Kind::Claim, name));
                continue;
            }
            (None, _) => {}
        }
        if let Some(live) = live {
            let want = dv_size(&dv).cloned();
            set_dv_size(&mut dv, dv_size(live));
            let have = claim
                .and_then(|c| requested(c.spec.as_ref()?.resources.as_ref()?.requests.as_ref()));
            if let (Some(want), Some(have)) = (want, have)
                && larger(&want, &have)
            {
                out.grow.push((name.clone(), want));
            }
        }
        // retain-disks covers the disks' DataVolumes, not the CD-ROMs' (installer media).
        let disk = sourced.iter().any(|v| v.claim_name == name && v.disk);
        if retain && disk {
            dv.metadata.owner_references = None;
            out.release.extend(
                live.filter(|_| owner == Ownership::Ours)
                    .and_then(|l| release_of(Kind::DataVolume, l.meta(), machine.uid)),
            );
        }
        if owner == Ownership::Released {
            out.adopting.push((Kind::DataVolume, name));
        }
        out.data_volumes.push(dv);
    }
    out
}

pub fn conflict(kind: Kind, name: String) -> Problem {
    Problem::Conflict { kind, name }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn referencing(uids: &[&str]) -> ObjectMeta {
        ObjectMeta {
            name: Some("m-data".into()),
            resource_version: Some("7".into()),
            owner_references: Some(
                uids.iter()
                    .map(|u| OwnerReference {
                        uid: (*u).into(),
                        ..OwnerReference::default()
                    })
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_release_drops_only_the_machines_references() {
        let r = release_of(
            Kind::Claim,
            &referencing(&["uid-m", "uid-x"]),
            Some("uid-m"),
        )
        .expect("a release");
        assert_eq!(r.name, "m-data");
        assert_eq!(r.resource_version.as_deref(), Some("7"));
        let left: Vec<&str> = r.owners.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(left, ["uid-x"]);
        assert_eq!(
            release_of(Kind::Claim, &referencing(&["uid-x"]), Some("uid-m")),
            None
        );
        assert_eq!(
            release_of(Kind::Claim, &referencing(&["uid-m"]), None),
            None
        );
    }

    #[test]
    fn cleanup_keeps_disks_under_retain_or_orphan_and_those_no_longer_referenced() {
        let r = || release_of(Kind::Claim, &referencing(&["uid-m"]), Some("uid-m"));
        // (keep, disk, references the Machine, expected)
        let cases = [
            (true, true, true, Fate::Keep(r())),
            (true, true, false, Fate::Keep(None)),
            (false, true, true, Fate::Delete),
            // Orphaned by the garbage collector before the cleanup saw the orphan finalizer.
            (false, true, false, Fate::Keep(None)),
            // A CD-ROM's DataVolume is installer media: it goes in every case.
            (true, false, true, Fate::Delete),
            (false, false, false, Fate::Delete),
        ];
        for (i, (keep, disk, referenced, want)) in cases.into_iter().enumerate() {
            let release = if referenced { r() } else { None };
            assert_eq!(fate(keep, disk, release), want, "case {i}");
        }
    }
}
