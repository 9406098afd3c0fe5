//! The `machine.vitistack.io/cleanup` finalizer: present before anything is created for a
//! Machine (the mutating webhook adds it on CREATE; [`ensure`] adds it to Machines stored
//! without it), removed once everything made for it is gone.
//!
//! Cleanup deletes explicitly rather than relying on owner-reference garbage collection, so it
//! also works where no garbage collector runs, and so that retained disks are really released.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::{Machine, MachineSpec};

use super::controller::Context;
use super::desired::meta::{derived_secret_name, pvc_name};
use super::error::{Error, is_not_found};
use super::kubevirt::{VirtualMachine, VirtualMachineInstance};
use super::multus::NetworkAttachmentDefinition;
use super::{
    FIELD_MANAGER, FINALIZER, MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, RETAIN_DISKS_ANNOTATION,
};

pub fn has_finalizer(machine: &Machine) -> bool {
    machine.finalizers().iter().any(|f| f == FINALIZER)
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// A merge patch of the finalizer list, guarded by the resourceVersion it was computed from, so
/// that a concurrent change of the list is a conflict (retried) rather than lost.
fn finalizers_patch(machine: &Machine, finalizers: Vec<String>) -> serde_json::Value {
    json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": machine.resource_version(),
        }
    })
}

/// Adds the finalizer when missing. Machines admitted by the webhook already carry it, so
/// this writes nothing for them.
pub async fn ensure(api: &Api<Machine>, machine: &Machine) -> Result<(), kube::Error> {
    if has_finalizer(machine) {
        return Ok(());
    }
    let mut list = machine.finalizers().to_vec();
    list.push(FINALIZER.to_owned());
    api.patch(
        &machine.name_any(),
        &patch_params(),
        &Patch::Merge(finalizers_patch(machine, list)),
    )
    .await
    .map(drop)
}

async fn remove(api: &Api<Machine>, machine: &Machine) -> Result<(), kube::Error> {
    let list: Vec<String> = machine
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    match api
        .patch(
            &machine.name_any(),
            &patch_params(),
            &Patch::Merge(finalizers_patch(machine, list)),
        )
        .await
    {
        Err(e) if is_not_found(&e) => Ok(()),
        other => other.map(drop),
    }
}

fn retains_disks(machine: &Machine) -> bool {
    machine
        .annotations()
        .get(RETAIN_DISKS_ANNOTATION)
        .is_some_and(|v| v == "true")
}

fn is_ours(meta: &ObjectMeta, machine: &str) -> bool {
    let labels = meta.labels.as_ref();
    labels
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .map(String::as_str)
        == Some(MANAGED_BY)
        && labels
            .and_then(|l| l.get(MACHINE_LABEL))
            .map(String::as_str)
            == Some(machine)
}

fn owned_by(meta: &ObjectMeta, uid: Option<&str>) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| Some(o.uid.as_str()) == uid)
}

async fn delete_ignoring_absent<K>(
    api: &Api<K>,
    name: &str,
    dp: &DeleteParams,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, dp).await {
        Err(e) if is_not_found(&e) => Ok(()),
        other => other.map(drop),
    }
}

/// Runs the cleanup steps in order; returns once the finalizer is removed, or an error while a
/// step is waiting (the controller retries with backoff, and the VMI's deletion triggers a run).
pub async fn cleanup(
    machine: &Machine,
    spec: &MachineSpec,
    ctx: &Context,
) -> Result<Action, Error> {
    if !has_finalizer(machine) {
        return Ok(Action::await_change());
    }
    let ns = machine.namespace().ok_or(Error::NoNamespace)?;
    let name = machine.name_any();
    let client = ctx.client.clone();
    let uid = machine.uid();

    // 1. The VM, then wait for KubeVirt to take its VMI down. Read from the API, not the cache:
    //    a VM written just before the deletion must not be missed.
    let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), &ns);
    if let Some(vm) = vms.get_metadata_opt(&name).await?
        && owned_by(&vm.metadata, uid.as_deref())
        && vm.metadata.deletion_timestamp.is_none()
    {
        let dp = DeleteParams::default().preconditions(Preconditions {
            uid: vm.metadata.uid.clone(),
            resource_version: None,
        });
        delete_ignoring_absent(&vms, &name, &dp).await?;
        tracing::info!(machine = %name, namespace = %ns, "deleted VirtualMachine");
    }
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(client.clone(), &ns);
    if let Some(vmi) = vmis.get_metadata_opt(&name).await?
        && is_ours(&vmi.metadata, &name)
    {
        return Err(Error::VmiStillRunning(format!("{ns}/{name}")));
    }

    // 2. The disks: deleted, or kept and released from the Machine.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let retain = retains_disks(machine);
    let claims = ctx.stores.pvcs.state_filter(|p| {
        p.namespace().as_deref() == Some(ns.as_str())
            && is_ours(p.meta(), &name)
            && owned_by(p.meta(), uid.as_deref())
    });
    for claim in claims {
        let claim_name = claim.name_any();
        if retain {
            let owners: Vec<_> = claim
                .owner_references()
                .iter()
                .filter(|o| Some(&o.uid) != uid.as_ref())
                .cloned()
                .collect();
            let patch = json!({"metadata": {
                "ownerReferences": owners,
                "resourceVersion": claim.resource_version(),
            }});
            pvcs.patch(&claim_name, &patch_params(), &Patch::Merge(patch))
                .await?;
            tracing::info!(machine = %name, namespace = %ns, pvc = %claim_name, "retained disk, released from the Machine");
        } else if claim.meta().deletion_timestamp.is_none() {
            delete_ignoring_absent(&pvcs, &claim_name, &DeleteParams::default()).await?;
            tracing::info!(machine = %name, namespace = %ns, pvc = %claim_name, "deleted disk");
        }
    }
    // Claims the cache may not hold yet (written just before deletion) are found by name.
    if !retain {
        for disk in &spec.disks {
            let claim_name = pvc_name(&name, &disk.name);
            if let Some(p) = pvcs.get_opt(&claim_name).await?
                && is_ours(p.meta(), &name)
                && p.meta().deletion_timestamp.is_none()
                && owned_by(p.meta(), uid.as_deref())
            {
                delete_ignoring_absent(&pvcs, &claim_name, &DeleteParams::default()).await?;
            }
        }
    }

    // 3. The derived cloud-init Secret, only if it is ours.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let derived = derived_secret_name(&name);
    if let Some(s) = secrets.get_metadata_opt(&derived).await?
        && is_ours(&s.metadata, &name)
    {
        let dp = DeleteParams::default().preconditions(Preconditions {
            uid: s.metadata.uid.clone(),
            resource_version: None,
        });
        delete_ignoring_absent(&secrets, &derived, &dp).await?;
    }

    // 4. Network attachments no other Machine in the namespace uses any more.
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(client.clone(), &ns);
    for network_name in spec.networks.iter().map(|n| n.network_name.as_str()) {
        let in_use = ctx.stores.machines.find(|m| {
            m.namespace().as_deref() == Some(ns.as_str())
                && m.uid() != uid
                && m.meta().deletion_timestamp.is_none()
                && m.spec
                    .networks
                    .iter()
                    .any(|n| n.network_name == network_name)
        });
        if in_use.is_some() {
            continue;
        }
        let nad = ctx
            .stores
            .nads
            .get(&ObjectRef::new(network_name).within(&ns));
        if let Some(nad) = nad
            && nad.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
        {
            delete_ignoring_absent(&nads, network_name, &DeleteParams::default()).await?;
            tracing::info!(machine = %name, namespace = %ns, network = %network_name, "deleted unused NetworkAttachmentDefinition");
        }
    }

    // 5. Let the Machine go.
    remove(&ctx.api_machines(&ns), machine).await?;
    tracing::info!(machine = %name, namespace = %ns, "cleanup finished, finalizer removed");
    Ok(Action::await_change())
}
