//! The MachineSnapshot controller: observe (the snapshot, its VirtualMachineSnapshot, the
//! Machine and its VM) → decide ([`super::mirror`], [`super::site`], and whether to make the
//! VirtualMachineSnapshot) → act (create it, write the status), on the Machine's cluster.
//!
//! On the operator's cluster the VirtualMachineSnapshot is controlled by its MachineSnapshot
//! (never by the Machine or the VM), so deleting the MachineSnapshot deletes it through the
//! garbage collector, and deleting the Machine keeps both. On a remote cluster it has no owner
//! reference; the MachineSnapshot's finalizer deletes it there ([`remote`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::{Context, NO_KUBEVIRT_SNAPSHOTS};
use super::error::Error;
use super::mirror;
use super::site::{self, Site};
use super::workload::{self, Workload};
use crate::api::Machine;
use crate::api::names::FIELD_MANAGER;
use crate::api::snapshots::{
    MachineSnapshot, MachineSnapshotStatus, SCHEDULED_PROOF_KIND, snapshot_phase,
};
use crate::reconciler::apis::snapshot::VirtualMachineSnapshot;
use crate::reconciler::decide::evidence::{OwnershipKey, Target};
use crate::reconciler::decide::ownership::controller_uid;
use crate::reconciler::run::watches::Scope;

/// On a VirtualMachineSnapshot: the uid of the Machine it was taken of.
pub const MACHINE_UID_ANNOTATION: &str = "vitistack.io/machine-uid";
/// On a VirtualMachineSnapshot the operator made: the proof that it took the MachineSnapshot
/// (name and uid) of the Machine (name and uid), in the write that creates it. A restore into a
/// Machine other than the one a snapshot was taken of trusts only this (or a scheduled
/// snapshot's made-for proof), never the uid a status says.
pub const TAKEN_OF_ANNOTATION: &str = "vitistack.io/taken-of";
/// The kind that proof names.
const TAKEN_KIND: &str = "MachineSnapshotTaken";

/// The proof's target: MachineSnapshot `name` with `uid` (a name holds no `/`).
fn taken_target<'a>(ns: &'a str, name_uid: &'a str) -> Target<'a> {
    Target {
        kind: TAKEN_KIND,
        namespace: ns,
        name: name_uid,
    }
}

/// The [`TAKEN_OF_ANNOTATION`] value for MachineSnapshot `s` taken of Machine uid `machine_uid`.
pub fn taken_proof(key: &OwnershipKey, s: &MachineSnapshot, machine_uid: &str) -> String {
    let ns = s.namespace().unwrap_or_default();
    let name_uid = format!("{}/{}", s.name_any(), s.uid().unwrap_or_default());
    key.proof(
        &taken_target(&ns, &name_uid),
        &s.spec.machine_name,
        machine_uid,
    )
}

/// The uid of the Machine (named as `s` says) the operator proves it took MachineSnapshot `s`
/// of: by the made-for proof of a scheduled snapshot, else by the proof on the
/// VirtualMachineSnapshot `vms` it made for `s` (controlled by `s`). `None`: nothing proves it.
pub fn taken_of(
    key: &OwnershipKey,
    s: &MachineSnapshot,
    vms: Option<&VirtualMachineSnapshot>,
) -> Option<String> {
    taken_of_on(key, s, vms, false)
}

/// [`taken_of`], for a VirtualMachineSnapshot on a `remote` cluster: there it has no owner
/// reference at all (none can reach the MachineSnapshot), the proof alone binds it to `s`.
pub fn taken_of_on(
    key: &OwnershipKey,
    s: &MachineSnapshot,
    vms: Option<&VirtualMachineSnapshot>,
    remote: bool,
) -> Option<String> {
    let machine = s.spec.machine_name.as_str();
    if let Some(uid) = key.made_for(SCHEDULED_PROOF_KIND, s.meta(), machine) {
        return Some(uid.to_owned());
    }
    let controller = |v: &VirtualMachineSnapshot| match remote {
        true => v.owner_references().is_empty(),
        false => controller_uid(v.meta()) == s.uid().as_deref(),
    };
    let vms = vms.filter(|v| s.uid().is_some() && controller(v))?;
    let value = vms.annotations().get(TAKEN_OF_ANNOTATION)?;
    let ns = s.namespace().unwrap_or_default();
    let name_uid = format!("{}/{}", s.name_any(), s.uid().unwrap_or_default());
    key.proven_for(&taken_target(&ns, &name_uid), machine, value)
        .map(str::to_owned)
}

/// `K` in every namespace of `scope`.
pub(super) fn scoped<K>(client: &kube::Client, scope: &Scope) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match scope {
        Scope::All => Api::all(client.clone()),
        Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
    }
}

pub async fn run(
    ctx: Arc<Context>,
    scope: &Scope,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let snapshots = scoped::<MachineSnapshot>(&ctx.client, scope);
    let mut controller = Controller::new(snapshots, watcher::Config::default());
    if ctx.kubevirt {
        let vm_snapshots = scoped::<VirtualMachineSnapshot>(&ctx.client, scope);
        controller = controller.owns(vm_snapshots, watcher::Config::default());
    }
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "MachineSnapshot reconcile");
            }
        })
        .await;
}

fn error_policy(s: Arc<MachineSnapshot>, e: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(snapshot = %s.name_any(), error = %e, "MachineSnapshot reconcile failed");
    Action::requeue(ctx.settings.tick)
}

/// Whether `v` is the VirtualMachineSnapshot the operator made for `s`: controlled by it on the
/// operator's cluster; on a remote one, no owner reference and the proof bound to `s`'s uid.
pub fn made_for(
    key: &OwnershipKey,
    s: &MachineSnapshot,
    v: &VirtualMachineSnapshot,
    remote: bool,
) -> bool {
    match remote {
        false => {
            controller_uid(v.meta()).is_some() && controller_uid(v.meta()) == s.uid().as_deref()
        }
        true => {
            let proven = |machine_uid: &str| {
                let value = v.annotations().get(TAKEN_OF_ANNOTATION);
                value.is_some_and(|p| *p == taken_proof(key, s, machine_uid))
            };
            let recorded = v.annotations().get(MACHINE_UID_ANNOTATION);
            s.uid().is_some()
                && v.owner_references().is_empty()
                && recorded.is_some_and(|u| proven(u))
        }
    }
}

async fn reconcile(s: Arc<MachineSnapshot>, ctx: Arc<Context>) -> Result<Action, Error> {
    if s.meta().deletion_timestamp.is_some() {
        return remote::on_delete(&s, &ctx).await;
    }
    let ns = s
        .namespace()
        .ok_or_else(|| Error::NoNamespace(s.name_any()))?;
    let name = s.name_any();
    let previous = s.status.clone().unwrap_or_default();
    // Where: the cluster it was taken on once recorded, else its Machine's.
    let (site, machine) = match (&previous.cluster, &previous.virtual_machine_snapshot_name) {
        (Some(cluster), _) => {
            let pinned = previous.cluster_identity.as_deref();
            (workload::site_at(&ctx, cluster, pinned), None)
        }
        (None, Some(_)) => (Site::Local, None),
        (None, None) => {
            let machine = Api::<Machine>::namespaced(ctx.client.clone(), &ns)
                .get_opt(&s.spec.machine_name)
                .await?;
            match &machine {
                Some(m) => (workload::site_of(&ctx, m, None).await?, machine),
                None => (Site::Local, None),
            }
        }
    };
    let remote = site.is_remote();
    let mut status = match (Workload::of(&ctx, &site), site) {
        (_, Site::Wait(why)) if previous.virtual_machine_snapshot_name.is_some() => {
            // Taken: what KubeVirt said last stands; the reason says why it is not read now.
            tracing::debug!(snapshot = %name, reason = %why.reason, "cluster of a snapshot not reachable");
            return Ok(Action::requeue(ctx.settings.tick));
        }
        (_, Site::Wait(why)) => mirror::cluster_waits(
            &why.reason,
            &why.message,
            (machine.as_ref().and_then(|m| m.uid()))
                .or_else(|| previous.machine_uid.clone())
                .as_deref(),
            (
                age(&s, &ctx),
                ctx.settings.limits.pending_limit,
                site::refused(&why.reason),
            ),
        ),
        (None, _) => return Ok(Action::requeue(ctx.settings.tick)),
        (Some(w), _) if !w.snapshot_api => {
            let why = match w.is_remote() {
                true => format!("{NO_KUBEVIRT_SNAPSHOTS} (on the Machine's cluster)"),
                false => NO_KUBEVIRT_SNAPSHOTS.to_owned(),
            };
            mirror::status(None, None, None, Some(why))
        }
        (Some(w), _) => take::observe_and_take(&s, &ns, &ctx, &w, machine, &previous).await?,
    };
    // Where it was taken is never forgotten (its deletion goes there).
    if status.cluster.is_none() {
        status.cluster.clone_from(&previous.cluster);
        status
            .cluster_identity
            .clone_from(&previous.cluster_identity);
    }
    let done = matches!(
        status.phase.as_deref(),
        Some(snapshot_phase::SUCCEEDED | snapshot_phase::FAILED)
    );
    if s.status.as_ref() != Some(&status) {
        write_status(&ctx.client, &ns, &name, &status).await?;
    }
    if done {
        return Ok(Action::await_change());
    }
    // Not done: looked at again with backoff (KubeVirt's status changes also wake it on this
    // cluster); one waiting for a VM or a cluster no later than when it gives up.
    let age = age(&s, &ctx);
    let mut next = mirror::next_look(age, remote, ctx.settings.tick);
    if status.virtual_machine_snapshot_name.is_none() {
        let left = ctx.settings.limits.pending_limit.saturating_sub(age);
        next = next.min(left.max(Duration::from_secs(1)));
    }
    Ok(Action::requeue(next))
}

/// How long the MachineSnapshot has existed, by the controllers' clock.
pub(super) fn age(s: &MachineSnapshot, ctx: &Context) -> Duration {
    let created = s
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second());
    let now = ctx.settings.clock.now().timestamp();
    Duration::from_secs(created.map_or(0, |c| u64::try_from(now - c).unwrap_or(0)))
}

pub(super) async fn write_status(
    client: &kube::Client,
    ns: &str,
    name: &str,
    status: &MachineSnapshotStatus,
) -> Result<(), Error> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    // The whole status, each field: one written by an earlier step and unset now is cleared.
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        for f in [
            "phase",
            "readyToUse",
            "creationTime",
            "disks",
            "error",
            "virtualMachineSnapshotName",
            "machineUid",
            "reason",
            "cluster",
            "clusterIdentity",
        ] {
            obj.entry(f).or_insert(serde_json::Value::Null);
        }
    }
    Api::<MachineSnapshot>::namespaced(client.clone(), ns)
        .patch_status(name, &params, &Patch::Merge(json!({ "status": value })))
        .await?;
    Ok(())
}

pub mod remote;
mod take;
#[cfg(test)]
mod tests;
