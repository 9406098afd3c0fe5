//! Re-proving objects made under a lost ownership key, once the admin accepted a new one
//! (`--new-ownership-key`; pure). Their proofs no longer verify, so without this every remote
//! Machine would be a conflict forever. They are judged once by the second edition's evidence
//! that does not cross clusters: our labels for the Machine, a name made for it, an object older
//! than the new key, and the Machine uid its old proof names. Anything else stays someone
//! else's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::desired::meta::derived_secret_name;
use super::evidence::{OwnershipKey, Target};
use super::ownership::{ATTACHMENT_KIND, MachineRef, labelled_for};
use crate::api::names::{MANAGED_BY, MANAGED_BY_LABEL, PROOF_ANNOTATION};

/// The uid an unverifiable made-for proof names (`<uid>.<tag>`).
fn claimed_uid(meta: &ObjectMeta) -> Option<&str> {
    let proof = meta.annotations.as_ref()?.get(PROOF_ANNOTATION)?;
    proof.split_once('.').map(|(uid, _)| uid)
}

/// Whether `name` is one the reconciler gives an object of `kind` for Machine `machine`.
fn named_for(kind: &str, name: &str, machine: &str) -> bool {
    match kind {
        "VirtualMachine" => name == machine,
        "Secret" => name == derived_secret_name(machine),
        // Claims and DataVolumes: `<machine>-<disk>`.
        _ => name
            .strip_prefix(machine)
            .is_some_and(|rest| rest.len() > 1 && rest.starts_with('-')),
    }
}

/// The new made-for proof of `meta`'s object (of `kind`), made for `machine` under the lost key,
/// or None when it is not to be re-proven.
pub fn reproof(
    kind: &str,
    meta: &ObjectMeta,
    machine: MachineRef,
    key: &OwnershipKey,
) -> Option<String> {
    let uid = machine.uid?;
    let target = Target::of(kind, meta)?;
    let due = key.predates_replacement(meta)
        && key.made_for(kind, meta, machine.name).is_none()
        && labelled_for(meta, machine.name)
        && named_for(kind, target.name, machine.name)
        && claimed_uid(meta) == Some(uid);
    due.then(|| key.proof(&target, machine.name, uid))
}

/// [`reproof`] for an attachment made for the NetworkConfiguration of its name, whose uid is
/// `nc_uid` now.
pub fn attachment_reproof(
    meta: &ObjectMeta,
    nc_uid: Option<&str>,
    key: &OwnershipKey,
) -> Option<String> {
    let uid = nc_uid?;
    let target = Target::of(ATTACHMENT_KIND, meta)?;
    let ours = meta.labels.as_ref().and_then(|l| l.get(MANAGED_BY_LABEL));
    let due = key.predates_replacement(meta)
        && key.made_for(ATTACHMENT_KIND, meta, target.name).is_none()
        && ours.map(String::as_str) == Some(MANAGED_BY)
        && claimed_uid(meta) == Some(uid);
    due.then(|| key.proof(&target, target.name, uid))
}

#[cfg(test)]
mod tests;
