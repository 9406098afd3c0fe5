//! Whose an object is, decided on evidence no Machine author can forge (pure, table-tested in
//! `ownership/tests.rs`). The evidence is the proofs of [`evidence`](super::evidence); labels
//! and owner references are never enough on their own.
//!
//! - **Ours**: its made-for proof says this operator made it for this Machine (name and uid).
//! - **Released**: its release proof says this operator released this very object (its uid) for
//!   a Machine of this name, and nothing of the Machine it was made for still holds it (no owner
//!   reference to it, not being deleted): what a `retain-disks` or orphan deletion leaves. Only
//!   claims and DataVolumes are adopted; a released VM or Secret is never written.
//! - **Foreign**: anything else with the name we want, including labels or a controller
//!   reference to the Machine's uid without a proof. Never modified nor deleted: a conflict.
//!
//! Objects created before the key existed (an upgrade) are judged once more by the second
//! edition's rules (controller uid, or our labels without a controller), and get their proof with
//! the next write.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use super::evidence::OwnershipKey;
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use crate::reconciler::{MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ownership {
    #[default]
    Absent,
    Ours,
    Released,
    Foreign,
}

impl Ownership {
    /// Whether the reconciler may write the object (create, update or adopt it).
    pub fn writable(self, adoptable: bool) -> bool {
        match self {
            Ownership::Absent | Ownership::Ours => true,
            Ownership::Released => adoptable,
            Ownership::Foreign => false,
        }
    }
}

/// The ownership of each object found under a name a Machine wants, judged once, when observed
/// (`observe::judged`); an object not found is [`Ownership::Absent`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdicts {
    pub vm: Ownership,
    /// The VMI named like the Machine is the one its VM controls, and that VM is ours.
    pub vmi: bool,
    pub derived_secret: Ownership,
    /// By name.
    pub claims: BTreeMap<String, Ownership>,
    pub data_volumes: BTreeMap<String, Ownership>,
    pub attachments: BTreeMap<String, Ownership>,
    /// A remote Machine's credential copies (Secrets and ConfigMaps, see `remote_secrets`).
    pub copies: BTreeMap<String, Ownership>,
}

impl Verdicts {
    pub fn claim(&self, name: &str) -> Ownership {
        self.claims.get(name).copied().unwrap_or_default()
    }

    pub fn data_volume(&self, name: &str) -> Ownership {
        self.data_volumes.get(name).copied().unwrap_or_default()
    }

    pub fn attachment(&self, name: &str) -> Ownership {
        self.attachments.get(name).copied().unwrap_or_default()
    }

    pub fn copy(&self, name: &str) -> Ownership {
        self.copies.get(name).copied().unwrap_or_default()
    }
}

/// The VMI that reports for the Machine: only one its VM controls (a VMI that merely carries
/// the Machine's labels, or its name, says nothing about it).
pub fn own_vmi<'a>(
    vm: Option<&VirtualMachine>,
    vmi: Option<&'a VirtualMachineInstance>,
) -> Option<&'a VirtualMachineInstance> {
    let vm_uid = vm.and_then(|v| v.meta().uid.as_deref());
    vmi.filter(|i| controlled_by(i.meta(), vm_uid))
}

/// The Machine objects are judged for.
#[derive(Clone, Copy, Debug)]
pub struct MachineRef<'a> {
    pub name: &'a str,
    /// `None` only for a Machine the API server never stored: nothing is ours then.
    pub uid: Option<&'a str>,
}

impl<'a> MachineRef<'a> {
    pub fn of(machine: &'a impl Resource) -> MachineRef<'a> {
        let meta = machine.meta();
        MachineRef {
            name: meta.name.as_deref().unwrap_or_default(),
            uid: meta.uid.as_deref(),
        }
    }
}

/// The uid of `meta`'s controller owner, if it has one.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn label<'m>(meta: &'m ObjectMeta, key: &str) -> Option<&'m str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Whether `meta` carries the operator's labels for Machine `machine`.
pub fn labelled_for(meta: &ObjectMeta, machine: &str) -> bool {
    label(meta, MANAGED_BY_LABEL) == Some(MANAGED_BY) && label(meta, MACHINE_LABEL) == Some(machine)
}

/// Ownership of `obj` (one with a name made for `machine`).
pub fn of<K: Resource<DynamicType = ()>>(
    obj: Option<&K>,
    machine: MachineRef,
    key: &OwnershipKey,
) -> Ownership {
    let kind = K::kind(&());
    of_meta(obj.map(Resource::meta), &kind, machine, key)
}

/// [`of`], for the metadata of an object of `kind`.
pub fn of_meta(
    meta: Option<&ObjectMeta>,
    kind: &str,
    machine: MachineRef,
    key: &OwnershipKey,
) -> Ownership {
    let Some(meta) = meta else {
        return Ownership::Absent;
    };
    // The second edition's verdict is cheap and pure; judged first, it is used only below.
    let old_rules = second_edition(meta, machine);
    let made = key.made_for(kind, meta, machine.name);
    if made.is_some() && made == machine.uid {
        return Ownership::Ours;
    }
    if key.released_for(kind, meta, machine.name) {
        // Released by us for this name; taken only once nothing of its earlier Machine holds it:
        // no owner reference to it that the garbage collector acts on, no deletion under way.
        let refs = || meta.owner_references.iter().flatten();
        let held = meta.deletion_timestamp.is_some()
            || made.is_some_and(|uid| refs().any(|r| r.uid == uid));
        return if held {
            Ownership::Foreign
        } else {
            Ownership::Released
        };
    }
    if made.is_none() && key.predates(meta) {
        return old_rules;
    }
    Ownership::Foreign
}

/// The second edition's rule, for objects older than the key.
fn second_edition(meta: &ObjectMeta, machine: MachineRef) -> Ownership {
    match controller_uid(meta) {
        Some(c) if Some(c) == machine.uid => Ownership::Ours,
        Some(_) => Ownership::Foreign,
        None if labelled_for(meta, machine.name) => Ownership::Released,
        None => Ownership::Foreign,
    }
}

/// Ownership of a NetworkAttachmentDefinition made for a NetworkConfiguration (uid `nc_uid`,
/// `None` once the NetworkConfiguration is gone: then a controller reference to a
/// NetworkConfiguration of the attachment's name is enough). Attachments serve every Machine on
/// a network and hold no data; they keep the second edition's rule.
pub fn of_attachment(meta: Option<&ObjectMeta>, nc_uid: Option<&str>) -> Ownership {
    let Some(meta) = meta else {
        return Ownership::Absent;
    };
    if label(meta, MANAGED_BY_LABEL) != Some(MANAGED_BY) {
        return Ownership::Foreign;
    }
    let controller = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    match (controller, nc_uid) {
        (Some(c), Some(uid)) if c.uid == uid => Ownership::Ours,
        (Some(c), None)
            if c.kind == "NetworkConfiguration" && meta.name.as_ref() == Some(&c.name) =>
        {
            Ownership::Ours
        }
        _ => Ownership::Foreign,
    }
}

/// The kind an attachment's proof is made for.
pub const ATTACHMENT_KIND: &str = "NetworkAttachmentDefinition";

/// Whether `meta` (a VMI's, a CDI claim's) is controlled by the object with uid `owner_uid`.
pub fn controlled_by(meta: &ObjectMeta, owner_uid: Option<&str>) -> bool {
    owner_uid.is_some() && controller_uid(meta) == owner_uid
}

#[cfg(test)]
mod tests;
