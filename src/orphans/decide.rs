//! Whether an object the operator may have made is a leftover (pure, table-tested in
//! `decide/tests.rs`): the same proofs as the reconciler's ownership rules
//! ([`crate::reconciler::decide::ownership`]), judged against every live Machine instead of one.
//!
//! - **Not ours**: no label or proof of ours at all: never listed.
//! - **Live**: its made-for proof names a live Machine (namespace, name and uid), or it is a disk
//!   released for a name a live Machine has (that Machine may adopt it).
//! - **Orphan**: a proof under our key, but no live Machine it belongs to: its Machine is gone
//!   (deleted with `abandon-remote`, or its finalizer removed by hand), was replaced by another
//!   of the same name, or it is a disk kept by `retain-disks` that nothing adopted.
//! - **Unproven**: our labels or a proof annotation that does not verify under our key: forged,
//!   copied, or made by another install. Listed apart; the operator never touches them.
//!
//! Objects older than the key (an upgrade from the second edition) are judged by its rule:
//! labelled for a Machine, they are that Machine's while one of that name lives (and, with a
//! controller reference, has that uid).
//!
//! [`tally`] turns one look at the clusters into what the leader's gauges say: per cluster and
//! kind, the leftovers and the unproven objects; a cluster that could not be looked at has no
//! count at all (never a zero).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::names::{MACHINE_LABEL, MANAGED_BY_LABEL, PROOF_ANNOTATION, RELEASE_ANNOTATION};
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::ownership::{controller_uid, labelled_for};

/// The live Machines: (namespace, name) to uid.
pub type LiveMachines = BTreeMap<(String, String), String>;

/// The kinds looked at, by their Kubernetes kind.
pub const KINDS: [&str; 3] = ["VirtualMachine", "PersistentVolumeClaim", "DataVolume"];

/// An object as listed, kept because it [`claims`] to be ours.
#[derive(Clone, Debug)]
pub struct Listed {
    pub kind: String,
    pub meta: ObjectMeta,
}

/// One object that claims to be ours and is not a live Machine's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub cluster: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub verdict: Verdict,
}

/// Why an object is a leftover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// Made for Machine `machine`, and no Machine of that name lives in the namespace.
    MachineGone,
    /// Made for Machine `machine` (another uid): the Machine of that name now is another one.
    MachineReplaced,
    /// A disk released (`retain-disks`, orphan deletion) for a Machine named `machine`, and no
    /// Machine of that name lives to adopt it.
    Released,
    /// Older than the ownership key, labelled for Machine `machine`, which is gone.
    MadeBeforeKey,
}

impl Why {
    /// The word the listing and its docs use.
    pub fn as_str(&self) -> &'static str {
        match self {
            Why::MachineGone => "MachineGone",
            Why::MachineReplaced => "MachineReplaced",
            Why::Released => "Released",
            Why::MadeBeforeKey => "MadeBeforeKey",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    NotOurs,
    Live,
    /// A leftover of Machine `machine`.
    Orphan {
        machine: String,
        why: Why,
    },
    /// Claims to be ours (a label or proof annotation), proven by nothing.
    Unproven,
}

fn label<'m>(meta: &'m ObjectMeta, key: &str) -> Option<&'m str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotated(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// Whether `meta` carries any label or proof annotation of ours (what is kept of a listing,
/// before the Machines are read) and is not being deleted (it is going anyway).
pub fn claims(meta: &ObjectMeta) -> bool {
    let ours = label(meta, MANAGED_BY_LABEL).is_some()
        || label(meta, MACHINE_LABEL).is_some()
        || annotated(meta, PROOF_ANNOTATION)
        || annotated(meta, RELEASE_ANNOTATION);
    ours && meta.deletion_timestamp.is_none()
}

/// The verdict on `meta`, an object of `kind` (`VirtualMachine`, `PersistentVolumeClaim`,
/// `DataVolume`), against the `live` Machines, under `key` (for a remote cluster, the key
/// without history: nothing there predates it).
pub fn judge(kind: &str, meta: &ObjectMeta, live: &LiveMachines, key: &OwnershipKey) -> Verdict {
    if !claims(meta) {
        return Verdict::NotOurs;
    }
    // Every proof is bound to the Machine's name, which the label carries.
    let Some(machine) = label(meta, MACHINE_LABEL) else {
        return Verdict::Unproven;
    };
    let ns = meta.namespace.clone().unwrap_or_default();
    let live_uid = live.get(&(ns, machine.to_owned())).map(String::as_str);
    let orphan = |why| Verdict::Orphan {
        machine: machine.to_owned(),
        why,
    };
    if let Some(uid) = key.made_for(kind, meta, machine) {
        return match live_uid {
            Some(live) if live == uid => Verdict::Live,
            Some(_) => orphan(Why::MachineReplaced),
            None => orphan(Why::MachineGone),
        };
    }
    if key.released_for(kind, meta, machine) {
        return match live_uid {
            Some(_) => Verdict::Live,
            None => orphan(Why::Released),
        };
    }
    if !annotated(meta, PROOF_ANNOTATION) && key.predates(meta) && labelled_for(meta, machine) {
        return match (live_uid, controller_uid(meta)) {
            (Some(live), Some(c)) if live != c => orphan(Why::MachineReplaced),
            (Some(_), _) => Verdict::Live,
            (None, _) => orphan(Why::MadeBeforeKey),
        };
    }
    Verdict::Unproven
}

/// The leftovers and unproven objects among what was `listed` on `cluster`, judged against the
/// `live` Machines (read after the listing, so an object made for a Machine created meanwhile
/// finds it) under `key`.
pub fn judged(
    cluster: &str,
    key: &OwnershipKey,
    listed: &[Listed],
    live: &LiveMachines,
) -> Vec<Found> {
    (listed.iter())
        .filter_map(|l| {
            let verdict = judge(&l.kind, &l.meta, live, key);
            matches!(verdict, Verdict::Orphan { .. } | Verdict::Unproven).then(|| Found {
                cluster: cluster.to_owned(),
                kind: l.kind.clone(),
                namespace: l.meta.namespace.clone().unwrap_or_default(),
                name: l.meta.name.clone().unwrap_or_default(),
                verdict,
            })
        })
        .collect()
}

/// One kind's numbers on a cluster that was looked at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Proven ours, belonging to no live Machine.
    pub leftovers: i64,
    /// Claiming to be ours, proven by nothing.
    pub unproven: i64,
}

/// Per cluster: `None` when it could not be looked at, else every kind of [`KINDS`] with its
/// count (zeros included, so "none" is said).
pub type Tally = BTreeMap<String, Option<BTreeMap<&'static str, Count>>>;

/// What the gauges say after one look: `found` on the `checked` clusters; the `unchecked` ones
/// (unreachable, not probed yet, a listing that failed) have no count, even if also named in
/// `checked` or `found`.
pub fn tally(found: &[Found], checked: &[String], unchecked: &[String]) -> Tally {
    let zeros = || KINDS.iter().map(|k| (*k, Count::default())).collect();
    let mut out: Tally = (checked.iter())
        .map(|c| (c.clone(), Some(zeros())))
        .collect();
    for f in found {
        let Some(Some(kinds)) = out.get_mut(&f.cluster) else {
            continue;
        };
        let Some(count) = kinds.get_mut(f.kind.as_str()) else {
            continue;
        };
        match f.verdict {
            Verdict::Orphan { .. } => count.leftovers += 1,
            Verdict::Unproven => count.unproven += 1,
            Verdict::Live | Verdict::NotOurs => {}
        }
    }
    for c in unchecked {
        out.insert(c.clone(), None);
    }
    out
}

/// What an admin can do with a leftover of `kind`: the command to delete it (on its cluster),
/// and whether and how it can be adopted.
pub fn advice(kind: &str, ns: &str, name: &str, machine: &str, why: &Why) -> String {
    let resource = match kind {
        "VirtualMachine" => "vm",
        "PersistentVolumeClaim" => "pvc",
        "DataVolume" => "dv",
        other => other,
    };
    let delete = format!("delete: kubectl delete {resource} {name} -n {ns}");
    let adopt = match (kind, why) {
        ("VirtualMachine", _) => "a VM is never adopted".to_owned(),
        (_, Why::Released | Why::MadeBeforeKey) => format!(
            "adopt: a Machine named {machine} in {ns} with the disk this one was made for \
             (the name after `{machine}-`) takes it"
        ),
        _ => format!(
            "keep the data: give a new Machine a disk with `source: {{pvc: {{name: {name}}}}}` \
             (a copy), then delete this one"
        ),
    };
    format!("{delete}; {adopt}")
}

#[cfg(test)]
mod tests;
