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
use kube::{Resource, ResourceExt};

use crate::api::Quantity;
use crate::reconciler::apis::cdi::{DataVolume, filled_for};
use crate::reconciler::decide::ownership::{MachineRef, Ownership};
use crate::reconciler::decide::problem::{Kind, Problem};
use crate::reconciler::decide::release::{Release, release_of};
use crate::reconciler::decide::volumes::Wanted;
use crate::reconciler::observe::Observed;
use crate::reconciler::observe::cleanup::retains_disks;

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
