//! The `machine.vitistack.io/cleanup` finalizer: present before anything is made for a Machine
//! (the mutating webhook adds it on CREATE; the reconciler adds it only to a never-reconciled
//! Machine stored without it), removed once everything made for it is gone. A finalizer you
//! remove stays removed.
//!
//! Cleanup deletes explicitly rather than relying on owner-reference garbage collection, so it
//! also works where no garbage collector runs, and under orphan deletion. It reads every object
//! by name from the API (the caches may not hold it yet), and touches only what is this
//! Machine's on the evidence of `decide::ownership`: never a released object, a conflicting one,
//! or one whose adoption failed. Under `retain-disks` or an orphan deletion the disks stay,
//! released.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeSet;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::Machine;

use super::delete_exact;
use super::disks;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::abandon::{requested as abandon_requested, unproven_vm_holds};
use crate::reconciler::decide::desired::meta::{derived_secret_name, pvc_name};
use crate::reconciler::decide::disks::{Fate, fate, keep, release_of};
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::ownership::{self, MachineRef, Ownership};
use crate::reconciler::decide::problem::Kind;
use crate::reconciler::decide::spec::resolved_spec;
use crate::reconciler::decide::volumes::sourced_volumes;
use crate::reconciler::decide::{remote, retains_disks};
use crate::reconciler::error::{Error, is_not_found};
use crate::reconciler::observe::unused_networks as unused_in;
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::{FIELD_MANAGER, FINALIZER};

pub fn has_finalizer(machine: &Machine) -> bool {
    machine.finalizers().iter().any(|f| f == FINALIZER)
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

async fn remove(api: &Api<Machine>, machine: &Machine) -> Result<(), kube::Error> {
    let list: Vec<String> = machine
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    // Guarded by the resourceVersion it was computed from: a concurrent change is a conflict
    // (retried) rather than lost.
    let patch = json!({"metadata": {
        "finalizers": list,
        "resourceVersion": machine.resource_version(),
    }});
    match api
        .patch(&machine.name_any(), &patch_params(), &Patch::Merge(patch))
        .await
    {
        Err(e) if is_not_found(&e) => Ok(()),
        other => other.map(drop),
    }
}

/// Lets a Machine whose remote cluster cannot be reached go without cleaning up there
/// (`vitistack.io/abandon-remote: "true"`).
pub async fn abandon(machine: &Machine, ctx: &Context) -> Result<(), Error> {
    if has_finalizer(machine) {
        let ns = machine.namespace().ok_or(Error::NoNamespace)?;
        remove(&Api::namespaced(ctx.client.clone(), &ns), machine).await?;
        ctx.per_machine
            .forget(&format!("{ns}/{}", machine.name_any()));
    }
    Ok(())
}

/// Whether the object of `kind` is this Machine's on the evidence (never a released one, a
/// conflicting one, or one whose adoption failed).
fn ours(kind: &str, meta: &ObjectMeta, machine: &Machine, key: &OwnershipKey) -> bool {
    ownership::of_meta(Some(meta), kind, MachineRef::of(machine), key) == Ownership::Ours
}

/// Whether the disks stay: `retain-disks`, or a deletion that orphans dependents
/// (`--cascade=orphan` puts the `orphan` finalizer on the Machine).
pub fn keeps_disks(machine: &Machine) -> bool {
    retains_disks(machine) || machine.finalizers().iter().any(|f| f == ORPHAN_FINALIZER)
}

/// The garbage collector's finalizer for orphan deletion.
const ORPHAN_FINALIZER: &str = "orphan";

/// Runs the cleanup steps in order; returns once the finalizer is removed, or an error while a
/// step is waiting (the controller retries with backoff, and the VMI's deletion triggers a run).
pub async fn cleanup(machine: &Machine, ctx: &Context, cluster: &Cluster) -> Result<(), Error> {
    if !has_finalizer(machine) {
        return Ok(());
    }
    let ns = machine.namespace().ok_or(Error::NoNamespace)?;
    let name = machine.name_any();
    let client = cluster.client.clone();
    let spec = resolved_spec(machine, &ctx.settings.catalog.load());
    let key = &cluster.key;

    // 1. The VM, then wait for KubeVirt to take down the VMI it controls.
    let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), &ns);
    let vm = vms.get_metadata_opt(&name).await?;
    // A VM of that name that is not ours (a conflict) is left alone, and so is its VMI.
    let vm_kind = VirtualMachine::kind(&());
    let foreign_vm = (vm.as_ref()).is_some_and(|v| !ours(&vm_kind, &v.metadata, machine, key));
    let vm_uid = vm.as_ref().and_then(|v| v.metadata.uid.clone());
    let labelled = (vm.as_ref()).is_some_and(|v| ownership::labelled_for(&v.metadata, &name));
    let abandoning = abandon_requested(machine.annotations());
    if unproven_vm_holds(!cluster.is_local(), labelled, !foreign_vm, abandoning) {
        return Err(Error::RemoteVmUnproven(format!("{ns}/{name}")));
    }
    if foreign_vm && labelled && abandoning && !cluster.is_local() {
        tracing::warn!("an unproven VM labelled for the Machine stays on its cluster: abandoned");
        return abandon(machine, ctx).await;
    }
    if let Some(vm) = vm.filter(|v| ours(&vm_kind, &v.metadata, machine, key))
        && vm.metadata.deletion_timestamp.is_none()
        && let Some(uid) = vm.metadata.uid.clone()
    {
        delete_exact(&vms, &name, uid).await?;
        tracing::info!("deleted VirtualMachine");
    }
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(client.clone(), &ns);
    if !foreign_vm
        && let Some(vmi) = vmis.get_metadata_opt(&name).await?
        && held_by_vm(&vmi.metadata, &name, vm_uid.as_deref())
    {
        return Err(Error::VmiStillRunning(format!("{ns}/{name}")));
    }

    // 2. The disks, by name: deleted, or kept and released (retain-disks, orphan deletion): their
    // proof then names a Machine that is gone, so a Machine of this name may adopt them.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let settling = Settling {
        client: &client,
        ns: &ns,
        machine,
        key,
        retain: keeps_disks(machine),
        remote: !cluster.is_local(),
    };
    for disk in &spec.disks {
        let claim_name = pvc_name(&name, &disk.name);
        settling
            .settle(&pvcs, Kind::Claim, &claim_name, true)
            .await?;
    }

    // The DataVolumes (disks with a source, CD-ROMs) likewise; CDI's claims go with them.
    // retain-disks keeps the disks' ones, released; a CD-ROM is installer media, not a disk.
    if cluster.apis.cdi {
        let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &ns);
        let volumes = sourced_volumes(&name, &spec);
        for v in &volumes {
            (settling.settle(&dvs, Kind::DataVolume, &v.claim_name, v.disk)).await?;
        }
        // A removed CD-ROM's, if the live Machine had not deleted it yet (cached, ours only).
        let leftovers = cluster.stores.data_volumes.state_filter(|dv| {
            dv.namespace().as_deref() == Some(ns.as_str())
                && dv.brief().as_deref() == Some(name.as_str())
                && !volumes.iter().any(|v| v.claim_name == dv.name_any())
        });
        let leftovers = (leftovers.iter())
            .filter_map(|dv| dv.unpack().ok())
            .filter(|dv| ownership::of(Some(dv), MachineRef::of(machine), key) == Ownership::Ours);
        for dv in leftovers {
            if let Some(uid) = dv.uid() {
                delete_exact(&dvs, &dv.name_any(), uid).await?;
            }
        }
    }

    // 3. The derived cloud-init Secret, only if it is ours.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let derived = derived_secret_name(&name);
    if let Some(s) = secrets.get_metadata_opt(&derived).await?
        && ours("Secret", &s.metadata, machine, key)
        && let Some(uid) = s.metadata.uid.clone()
    {
        delete_exact(&secrets, &derived, uid).await?;
    }

    // 4. Its attachments, read by name, that are ours and no other Machine there uses.
    if cluster.apis.multus {
        let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(client.clone(), &ns);
        let unused: BTreeSet<String> = unused_in(ctx, cluster, &ns, &name);
        let mine: BTreeSet<&str> = spec
            .networks
            .iter()
            .map(|n| n.network_name.as_str())
            .collect();
        for network in mine.into_iter().filter(|n| unused.contains(*n)) {
            let Some(nad) = nads.get_metadata_opt(network).await? else {
                continue;
            };
            let nc_uid = ctx
                .stores
                .network_configurations
                .get(&ObjectRef::new(network).within(&ns))
                .and_then(|nc| nc.uid());
            let owner = remote::attachment(
                !cluster.is_local(),
                Some(&nad.metadata),
                nc_uid.as_deref(),
                key,
            );
            if owner == Ownership::Ours
                && let Some(uid) = nad.metadata.uid.clone()
            {
                delete_exact(&nads, network, uid).await?;
                tracing::info!(network, "deleted unused NetworkAttachmentDefinition");
            }
        }
    }

    // 5. Let the Machine go, and what is remembered of it.
    remove(&Api::namespaced(ctx.client.clone(), &ns), machine).await?;
    ctx.per_machine.forget(&format!("{ns}/{name}"));
    tracing::info!("cleanup finished, finalizer removed");
    Ok(())
}

/// What cleanup needs to settle one of the Machine's claims or DataVolumes.
struct Settling<'a> {
    client: &'a kube::Client,
    ns: &'a str,
    machine: &'a Machine,
    key: &'a OwnershipKey,
    /// retain-disks or an orphan deletion ([`keeps_disks`]).
    retain: bool,
    /// On a remote cluster, where no owner reference is ever written: the proof alone binds.
    remote: bool,
}

impl Settling<'_> {
    /// The object `name` (a `disk`'s, or a CD-ROM's), read by name: left alone unless ours and
    /// not already going; then kept and released, or deleted, as [`fate`] says.
    async fn settle<K>(&self, api: &Api<K>, kind: Kind, name: &str, disk: bool) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let Some(found) = api.get_metadata_opt(name).await? else {
            return Ok(());
        };
        let m = &found.metadata;
        let ours = ours(&K::kind(&()), m, self.machine, self.key);
        if !ours || m.deletion_timestamp.is_some() {
            return Ok(());
        }
        let references =
            self.remote || release_of(kind, m, self.machine.uid().as_deref()).is_some();
        match fate(self.retain, disk, references) {
            Fate::Keep => {
                if let Some(r) = keep(kind, m, MachineRef::of(self.machine), self.key) {
                    disks::release(self.client, self.ns, &r).await?;
                }
            }
            Fate::Delete => {
                if let Some(uid) = m.uid.clone() {
                    delete_exact(api, name, uid).await?;
                    tracing::info!(object = %name, kind = kind.as_str(), "deleted");
                }
            }
        }
        Ok(())
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
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn vmi(owner: Option<(&str, &str, &str)>) -> ObjectMeta {
        ObjectMeta {
            owner_references: owner.map(|(kind, name, uid)| {
                vec![OwnerReference {
                    kind: kind.into(),
                    name: name.into(),
                    uid: uid.into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_a_vmi_of_the_machines_vm_holds_its_deletion() {
        let ours = vmi(Some(("VirtualMachine", "m", "uid-vm")));
        assert!(held_by_vm(&ours, "m", Some("uid-vm")));
        // The VM is already gone: its VMI still holds until KubeVirt removes it.
        assert!(held_by_vm(&ours, "m", None));
        assert!(!held_by_vm(&ours, "m", Some("uid-other-vm")));
        assert!(!held_by_vm(&vmi(None), "m", None), "forged: no owner");
        assert!(!held_by_vm(&vmi(Some(("ReplicaSet", "m", "x"))), "m", None));
        assert!(!held_by_vm(
            &vmi(Some(("VirtualMachine", "n", "x"))),
            "m",
            None
        ));
    }
}
