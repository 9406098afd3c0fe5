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
use crate::reconciler::RETAIN_DISKS_ANNOTATION;
use crate::reconciler::apis::cdi::{DataVolume, filled_for};
use crate::reconciler::decide::evidence::{OwnershipKey, Target};
use crate::reconciler::decide::ownership::{MachineRef, Ownership};
use crate::reconciler::decide::problem::{Kind, Problem};
use crate::reconciler::decide::volumes::Wanted;
use crate::reconciler::observe::Observed;

/// Whether the Machine's disks stay when it goes (`vitistack.io/retain-disks: "true"`).
pub fn retains_disks(machine: &impl Resource) -> bool {
    machine
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(RETAIN_DISKS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// An object of ours to free of the Machine's owner references (metadata only).
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub kind: Kind,
    pub name: String,
    /// Its owner references without the Machine's.
    pub owners: Vec<OwnerReference>,
    /// The version they were read at: a concurrent change is a conflict, retried.
    pub resource_version: Option<String>,
    /// The release proof to add (at cleanup, for a disk kept for a Machine of this name).
    pub release_proof: Option<String>,
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
        release_proof: None,
    })
}

/// What keeps `meta`'s object (of `kind`, ours) at cleanup: the Machine's references dropped
/// and the release proof, bound to the object's uid, added; `None` when it has both already.
pub fn keep(
    kind: Kind,
    meta: &ObjectMeta,
    machine: MachineRef,
    key: &OwnershipKey,
) -> Option<Release> {
    let release = release_of(kind, meta, machine.uid);
    let uid = meta.uid.as_deref()?;
    let target = Target::of(kind.as_str(), meta)?;
    let proven = key.released_for(kind.as_str(), meta, machine.name);
    if proven && release.is_none() {
        return None;
    }
    let proof = (!proven).then(|| key.release_proof(&target, uid, machine.name));
    let mut r = release.unwrap_or_else(|| Release {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        owners: meta.owner_references.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone(),
        release_proof: None,
    });
    r.release_proof = proof;
    Some(r)
}

/// What the disks' part decided.
#[derive(Debug, Default)]
pub struct Disks {
    /// `retain-disks` holds.
    pub retain: bool,
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
    sourced: &[Wanted],
    claims: Vec<PersistentVolumeClaim>,
    data_volumes: Vec<DataVolume>,
) -> Disks {
    let retain = retains_disks(&o.machine);
    let machine = MachineRef::of(&o.machine);
    let mut out = Disks {
        retain,
        ..Disks::default()
    };
    for mut claim in claims {
        let name = claim.name_any();
        let live = o.claims.get(&name);
        let owner = o.verdicts.claim(&name);
        if !owner.writable(true) {
            out.problems.push(conflict(Kind::Claim, name));
            continue;
        }
        // A claim's modes are immutable: one made keeps them, whatever the StorageProfile says
        // now (or said when an earlier version defaulted them).
        if let (Some(live), Some(want)) = (live.and_then(|l| l.spec.as_ref()), claim.spec.as_mut())
        {
            want.access_modes.clone_from(&live.access_modes);
            want.volume_mode.clone_from(&live.volume_mode);
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
        let owner = o.verdicts.data_volume(&name);
        if !owner.writable(true) {
            out.problems.push(conflict(Kind::DataVolume, name));
            continue;
        }
        let unpinned = dv.spec.source.is_none() && dv.spec.source_ref.is_none();
        if unpinned && live.is_none() {
            let volume = sourced.iter().find(|v| v.claim_name == name);
            out.problems.push(Problem::CloneSourceNotPinned {
                volume: volume.map_or_else(|| name.clone(), |v| v.label.clone()),
            });
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
            // CDI refuses any change of a DataVolume's source: it keeps what it was made from
            // (a clone pinned then, or a `sourceRef` made before pinning).
            dv.spec.source.clone_from(&live.spec.source);
            dv.spec.source_ref.clone_from(&live.spec.source_ref);
            // Grown: larger than the DataVolume was made with, and than CDI's claim asks (CDI
            // may size its claim above the DataVolume for filesystem overhead).
            let want = dv_size(&dv).cloned();
            let made = dv_size(live).cloned();
            set_dv_size(&mut dv, made.as_ref());
            let have = claim
                .and_then(|c| requested(c.spec.as_ref()?.resources.as_ref()?.requests.as_ref()));
            if let (Some(want), Some(made), Some(have)) = (want, made, have)
                && larger(&want, &made)
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
    fn a_kept_disk_gets_the_release_proof_for_its_very_uid_once() {
        let key = OwnershipKey::new(&[3; 32], None).expect("key");
        let m = MachineRef {
            name: "m",
            uid: Some("uid-m"),
        };
        let mut meta = referencing(&["uid-m", "uid-x"]);
        meta.uid = Some("uid-c".into());
        let r = keep(Kind::Claim, &meta, m, &key).expect("a release");
        let left: Vec<&str> = r.owners.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(left, ["uid-x"]);
        let proof = r.release_proof.clone().expect("a release proof");
        // Applied: proven, unreferenced: nothing more to do.
        meta.owner_references = Some(r.owners);
        meta.annotations = Some([(crate::api::names::RELEASE_ANNOTATION.to_owned(), proof)].into());
        assert!(key.released_for("PersistentVolumeClaim", &meta, "m"));
        assert_eq!(keep(Kind::Claim, &meta, m, &key), None);
        // Proven but referenced again: only the references go.
        meta.owner_references = Some(referencing(&["uid-m"]).owner_references.unwrap_or_default());
        let again = keep(Kind::Claim, &meta, m, &key).expect("a release");
        assert_eq!((again.owners.len(), again.release_proof), (0, None));
    }
}
