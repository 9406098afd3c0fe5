//! A hot-plugged disk removed from the Machine (pure): KubeVirt detaches it from the running VMI
//! once the VM is written without it, and its claim (or, for a disk with a source, its
//! DataVolume, which keeps CDI's claim) is kept, released for a Machine of this name: freed of
//! the Machine's owner references, with the release proof, exactly as `retain-disks` keeps a
//! disk at deletion. Nothing is deleted; adding a disk of the same name again adopts and
//! mounts it, with its data.

use kube::Resource;

use super::unplugged;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::ownership::{MachineRef, Ownership};
use crate::reconciler::decide::problem::Kind;
use crate::reconciler::decide::release::{Release, keep};
use crate::reconciler::observe::Observed;

/// The releases that keep the unplugged disks of `o`, ours only (never one released, another's
/// or a conflict), as observed.
pub fn keep_unplugged(o: &Observed, key: &OwnershipKey) -> Vec<Release> {
    let disks: Vec<&str> = o.spec.disks.iter().map(|d| d.name.as_str()).collect();
    let machine = MachineRef::of(&o.machine);
    let live = o.vm.as_ref().filter(|_| o.verdicts.vm == Ownership::Ours);
    unplugged(live, &disks)
        .into_iter()
        .filter_map(|(kind, name)| {
            let (meta, owner) = match kind {
                Kind::DataVolume => (
                    o.data_volumes.get(&name).map(|d| d.meta()),
                    o.verdicts.data_volume(&name),
                ),
                _ => (
                    o.claims.get(&name).map(|c| c.meta()),
                    o.verdicts.claim(&name),
                ),
            };
            keep(
                kind,
                meta.filter(|_| owner == Ownership::Ours)?,
                machine,
                key,
            )
        })
        .collect()
}
