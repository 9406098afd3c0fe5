//! Cleanup's decision (pure, table-tested in `cleanup/tests.rs`): from what was read of a
//! deleting Machine, what is deleted (by exact uid), released, kept or waited for, each with its
//! reason, and whether its `machine.vitistack.io/cleanup` finalizer goes.
//!
//! Cleanup deletes explicitly rather than relying on owner-reference garbage collection, so it
//! also works where no garbage collector runs (a remote cluster), and under orphan deletion. It
//! touches only what is the Machine's on the evidence of `decide::ownership` (judged when read,
//! in `observe::cleanup`): never a released object, a conflicting one, or one whose adoption
//! failed (nor one left unjudged). Under `retain-disks` or an orphan deletion the disks stay,
//! released: their proof then names a Machine that is gone, so a Machine of this name may adopt
//! them. A CD-ROM's DataVolume is installer media, not a disk: it goes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::api::Machine;
use crate::api::names::ABANDON_REMOTE_ANNOTATION;
use crate::reconciler::decide::problem::Kind;
pub use crate::reconciler::observe::cleanup::has_finalizer;
use crate::reconciler::observe::cleanup::{Away, Judged, Remains, Volume};

mod plan;
pub use plan::{Action, Plan, Reason, Wait};

/// The garbage collector's finalizer for orphan deletion.
const ORPHAN_FINALIZER: &str = "orphan";

/// Whether the admin let the Machine's deletion finish without its remote cluster
/// (`vitistack.io/abandon-remote: "true"`).
fn abandoned(machine: &Machine) -> bool {
    machine
        .annotations()
        .get(ABANDON_REMOTE_ANNOTATION)
        .map(String::as_str)
        == Some("true")
}

/// Why the disks stay, if they do: `retain-disks`, or a deletion that orphans dependents
/// (`--cascade=orphan` puts the `orphan` finalizer on the Machine).
fn keeps_disks(machine: &Machine, retain_disks: bool) -> Option<Reason> {
    if retain_disks {
        Some(Reason::RetainDisks)
    } else if machine.finalizers().iter().any(|f| f == ORPHAN_FINALIZER) {
        Some(Reason::OrphanDeletion)
    } else {
        None
    }
}

/// A deleting Machine whose remote cluster cannot be worked on (`away`): nothing there is
/// touched, so it waits for the cluster and says how to let it go, unless the admin abandoned
/// it there (`vitistack.io/abandon-remote: "true"`): then it goes, and what it made there stays.
/// Abandonment is honoured only once the cluster was looked at and found unusable: in a new
/// leader's first seconds (the cluster listed, its caches filling) it may be healthy, and an
/// abandonment then would leave its VM running with no Machine.
fn without_cluster(machine: &Machine, away: &Away) -> Plan {
    let wait = |cluster_message| Plan {
        wait: Some(Wait::Cluster),
        cluster_message,
        ..Plan::default()
    };
    match (abandoned(machine), away.probed) {
        (_, false) => wait(None),
        (true, true) => Plan {
            remove_finalizer: true,
            ..Plan::default()
        },
        (false, true) => wait(Some(format!(
            "{}; its deletion waits for the cluster: to let it go without cleaning up there (what it made there stays), annotate it {ABANDON_REMOTE_ANNOTATION}=true",
            away.message
        ))),
    }
}

/// The plan for what remains of a Machine, `o` (whose each object is, judged when read): the VM
/// first, then (once no VMI of it holds the deletion) its disks, DataVolumes, derived Secret and
/// attachments; then the finalizer.
pub fn planned(o: &Remains) -> Plan {
    let mut plan = Plan::default();
    if !has_finalizer(&o.machine) {
        return plan;
    }
    if o.restoring.is_some() {
        plan.wait = Some(Wait::Restore);
        return plan;
    }
    if let Some(away) = &o.away {
        return without_cluster(&o.machine, away);
    }
    let judged = &o.verdicts;
    let name = o.machine.metadata.name.as_deref().unwrap_or_default();
    let vm_uid = o.vm.as_ref().and_then(|v| v.uid.as_deref());
    let vmi_held = (o.vmi.as_ref()).is_some_and(|i| held_by_vm(i, name, vm_uid));
    let retain = keeps_disks(&o.machine, o.retain_disks);
    let vm = (o.vm.as_ref()).map(|vm| (vm, judged.vm));
    // Anything left unjudged is not ours.
    let ours = |verdicts: &[bool], i: usize| verdicts.get(i).copied().unwrap_or(false);
    let removed = (o.removed_data_volumes.iter().enumerate())
        .map(|(i, dv)| (dv, ours(&judged.removed_data_volumes, i)));
    let secret = (o.derived_secret.as_ref()).map(|s| (s, judged.derived_secret));
    let attachments =
        (o.attachments.iter().enumerate()).map(|(i, a)| (&a.meta, ours(&judged.attachments, i)));

    // 1. The VM; a VM of that name that is not ours (a conflict) is left alone, and so is its VMI.
    if let Some((meta, ours)) = vm {
        plan.actions
            .extend(fate_of(Kind::VirtualMachine, meta, ours));
        // On a remote cluster, one labelled for the Machine may be its own made under a lost
        // key: the Machine stays while it runs, unless abandoned (then everything stays).
        if o.remote && !ours && judged.vm_labelled {
            match abandoned(&o.machine) {
                true => plan.remove_finalizer = true,
                false => plan.wait = Some(Wait::UnprovenVm),
            }
            return plan;
        }
    }
    if vm.is_none_or(|(_, ours)| ours) && vmi_held {
        plan.wait = Some(Wait::Vmi);
        return plan;
    }
    // 2. The disks' claims and the DataVolumes: deleted, or kept and released.
    for (i, v) in o.volumes.iter().enumerate() {
        let unjudged = Judged {
            ours: false,
            references: false,
            keep: None,
        };
        let judged = judged.volumes.get(i).unwrap_or(&unjudged);
        plan.actions.extend(settle(v, judged, retain));
    }
    for (dv, ours) in removed {
        (plan.actions).extend(delete_if(Kind::DataVolume, dv, ours, Reason::RemovedCdrom));
    }
    // 3. The derived cloud-init Secret, only if it is ours.
    if let Some((meta, ours)) = secret {
        (plan.actions).extend(delete_if(Kind::Secret, meta, ours, Reason::Ours));
    }
    // 4. Its attachments that are ours and no other Machine there uses.
    for (meta, ours) in attachments {
        (plan.actions).extend(delete_if(Kind::Attachment, meta, ours, Reason::Unused));
    }
    // 5. A remote Machine's credential copies that are ours, once nothing there reads them.
    for (i, (kind, meta)) in o.credential_copies.iter().enumerate() {
        let ours = ours(&judged.credential_copies, i);
        (plan.actions).extend(delete_if(*kind, meta, ours, Reason::Ours));
    }
    // 6. Everything made for it is gone or kept: the Machine goes.
    plan.remove_finalizer = true;
    plan
}

/// An object of `kind` deleted if ours and not already going; left alone otherwise.
fn fate_of(kind: Kind, meta: &ObjectMeta, ours: bool) -> Option<Action> {
    if ours && meta.deletion_timestamp.is_some() {
        return Some(left(kind, meta, Reason::Going));
    }
    delete_if(kind, meta, ours, Reason::Ours)
}

/// Deleted by its uid, for `why`, if `ours`; left alone otherwise. An object without a uid
/// (never stored) is nothing to act on.
fn delete_if(kind: Kind, meta: &ObjectMeta, ours: bool, why: Reason) -> Option<Action> {
    if !ours {
        return Some(left(kind, meta, Reason::NotOurs));
    }
    Some(Action::Delete {
        kind,
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone()?,
        reason: why,
    })
}

fn left(kind: Kind, meta: &ObjectMeta, reason: Reason) -> Action {
    let name = meta.name.clone().unwrap_or_default();
    Action::Keep { kind, name, reason }
}

/// One of the Machine's claims or DataVolumes: left alone unless ours and not already going;
/// then kept and released, or deleted, as [`fate`] says.
fn settle(v: &Volume, judged: &Judged, retain: Option<Reason>) -> Option<Action> {
    let (kind, meta) = (v.kind, &v.meta);
    if !judged.ours || meta.deletion_timestamp.is_some() {
        return fate_of(kind, meta, judged.ours);
    }
    match fate(retain.is_some(), v.disk, judged.references) {
        Fate::Delete => delete_if(kind, meta, true, Reason::Ours),
        Fate::Keep => Some(match judged.keep.clone() {
            Some(release) => Action::Release {
                release,
                reason: retain.unwrap_or(Reason::Unreferenced),
            },
            None => left(kind, meta, Reason::Released),
        }),
    }
}

/// What cleanup does with one of the Machine's claims or DataVolumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Kept, released (see [`keep`]).
    Keep,
    Delete,
}

/// The fate of an object of ours at cleanup: a disk's stays under `retain` (retain-disks or an
/// orphan deletion), and so does one that no longer `references` the Machine at all (the garbage
/// collector orphaned it before the cleanup ran, or an admin freed it); a CD-ROM's goes.
pub fn fate(retain: bool, disk: bool, references: bool) -> Fate {
    match (disk, retain, references) {
        (false, _, _) => Fate::Delete,
        (true, true, _) | (true, false, false) => Fate::Keep,
        (true, false, true) => Fate::Delete,
    }
}

/// A VMI holds the deletion only if a VirtualMachine of the Machine's name controls it (the
/// VM's uid when it is still there): a VMI that merely carries the labels does not.
fn held_by_vm(meta: &ObjectMeta, machine: &str, vm_uid: Option<&str>) -> bool {
    meta.owner_references.iter().flatten().any(|r| {
        r.controller == Some(true)
            && r.kind == "VirtualMachine"
            && r.name == machine
            && vm_uid.is_none_or(|u| u == r.uid)
    })
}

#[cfg(test)]
mod tests;
