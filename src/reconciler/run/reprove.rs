//! Re-proving a remote cluster's objects made under a lost ownership key (I/O), once its caches
//! are filled and before any of its Machines is reconciled; only under a key that replaced a
//! lost one (`--new-ownership-key`). What is re-proven is `decide::reprove`'s to say; each
//! object gets its new proof in one merge patch (guarded by its resourceVersion) and an Event on
//! its Machine. Objects already re-proven verify and are skipped, so a restart repeats nothing.

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::cluster::Cluster;
use crate::api::names::{FIELD_MANAGER, MACHINE_LABEL, PROOF_ANNOTATION};
use crate::api::{Machine, NetworkConfiguration};
use crate::reconciler::act::events::{Publisher, publish};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::desired::meta::derived_secret_name;
use crate::reconciler::decide::notices::Notice;
use crate::reconciler::decide::ownership::MachineRef;
use crate::reconciler::decide::reprove::{attachment_reproof, reproof};
use crate::reconciler::store::last_write::LastWrite;
use crate::reconciler::store::packed::Packed;

/// The Event reason on a Machine one of whose objects was re-proven.
pub const REPROVEN: &str = "OwnershipReproven";

/// What re-proving needs of the management cluster.
#[derive(Clone)]
pub struct Reproving {
    /// NetworkConfigurations (an attachment is re-proven for the one of its name).
    pub management: Client,
    pub events: Publisher,
}

/// Re-proves what `cluster`'s caches hold (and the Machines' derived Secrets there).
pub async fn run(cluster: &Cluster, machines: &Store<Packed<Machine>>, with: &Reproving) {
    if cluster.key.replaced().is_none() {
        return;
    }
    let stores = &cluster.stores;
    let written = &cluster.written;
    let mut count = 0;
    for vm in stores.vms.state() {
        count +=
            one::<VirtualMachine>(cluster, machines, with, vm.unpack().ok(), &written.vms).await;
    }
    for pvc in stores.pvcs.state() {
        let pvc = pvc.unpack().ok();
        count += one::<PersistentVolumeClaim>(cluster, machines, with, pvc, &written.pvcs).await;
    }
    for dv in stores.data_volumes.state() {
        let dv = dv.unpack().ok();
        count += one::<DataVolume>(cluster, machines, with, dv, &written.data_volumes).await;
    }
    // Derived Secrets are not cached: read by name, for each Machine on this cluster.
    let here = (machines.state().into_iter())
        .filter(|m| m.brief().cluster.as_deref() == cluster.name.as_deref());
    for m in here {
        let ns = m.namespace().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(cluster.client.clone(), &ns);
        let secret = api
            .get_opt(&derived_secret_name(&m.name_any()))
            .await
            .ok()
            .flatten();
        count += one::<Secret>(cluster, machines, with, secret, &written.secrets).await;
    }
    for nad in stores.nads.state() {
        if let Ok(nad) = nad.unpack() {
            count += attachment(cluster, with, nad).await;
        }
    }
    tracing::info!(cluster = ?cluster.name, count, "re-proved the objects made under the lost ownership key");
}

/// Re-proves `object` if it is due; 1 if it was.
async fn one<K>(
    cluster: &Cluster,
    machines: &Store<Packed<Machine>>,
    with: &Reproving,
    object: Option<K>,
    written: &LastWrite<K>,
) -> usize
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let Some(object) = object else { return 0 };
    let meta = object.meta();
    let (Some(ns), Some(name)) = (
        meta.namespace.as_deref(),
        object.labels().get(MACHINE_LABEL),
    ) else {
        return 0;
    };
    let machine = machines
        .get(&ObjectRef::new(name).within(ns))
        .and_then(|m| m.unpack().ok());
    let Some(machine) = machine else { return 0 };
    let kind = K::kind(&());
    let Some(proof) = reproof(&kind, meta, MachineRef::of(&machine), &cluster.key) else {
        return 0;
    };
    let Some(patched) = prove::<K>(&cluster.client, meta, &proof).await else {
        return 0;
    };
    let key = format!("{ns}/{}", patched.name_any());
    written.record(key, patched.resource_version().as_deref(), patched.clone());
    let note = format!(
        "{kind} {} on cluster {} was made under the lost ownership key: re-proven by its labels and name",
        patched.name_any(),
        cluster.name.as_deref().unwrap_or_default()
    );
    let notice = Notice {
        type_: EventType::Normal,
        reason: REPROVEN.to_owned(),
        note,
    };
    publish(&with.events, &machine, vec![notice]).await;
    1
}

/// Re-proves an attachment for the NetworkConfiguration of its name, if it is due.
async fn attachment(
    cluster: &Cluster,
    with: &Reproving,
    nad: NetworkAttachmentDefinition,
) -> usize {
    let meta = nad.meta();
    let Some(ns) = meta.namespace.as_deref() else {
        return 0;
    };
    let ncs: Api<NetworkConfiguration> = Api::namespaced(with.management.clone(), ns);
    let nc_uid = ncs
        .get_opt(&nad.name_any())
        .await
        .ok()
        .flatten()
        .and_then(|nc| nc.uid());
    let Some(proof) = attachment_reproof(meta, nc_uid.as_deref(), &cluster.key) else {
        return 0;
    };
    match prove::<NetworkAttachmentDefinition>(&cluster.client, meta, &proof).await {
        Some(patched) => {
            let key = format!("{ns}/{}", patched.name_any());
            let rv = patched.resource_version();
            cluster.written.nads.record(key, rv.as_deref(), patched);
            tracing::info!(namespace = ns, attachment = %nad.name_any(), "re-proved an attachment made under the lost ownership key");
            1
        }
        None => 0,
    }
}

/// Writes `proof` into the object of `meta`, if it did not change since.
async fn prove<K>(client: &Client, meta: &ObjectMeta, proof: &str) -> Option<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let (ns, name) = (meta.namespace.as_deref()?, meta.name.as_deref()?);
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let patch = json!({"metadata": {
        "annotations": {PROOF_ANNOTATION: proof},
        "resourceVersion": meta.resource_version,
    }});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api.patch(name, &params, &Patch::Merge(patch)).await {
        Ok(patched) => Some(patched),
        Err(e) => {
            tracing::warn!(namespace = ns, name, kind = %K::kind(&()), error = %e, "could not re-prove an object made under the lost ownership key; its Machine shows a conflict");
            None
        }
    }
}
