//! Carries out cleanup's plan (`decide::cleanup`) for the `machine.vitistack.io/cleanup`
//! finalizer: present before anything is made for a Machine (the mutating webhook adds it on
//! CREATE; the reconciler adds it only to a never-reconciled Machine stored without it), removed
//! once everything made for it is gone. A finalizer you remove stays removed.
//!
//! Nothing is judged here: each deletion names the exact uid it was decided for, so a namesake
//! made since is never touched.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::Machine;

use super::{delete, disks};
use crate::reconciler::decide::cleanup::{Action, Plan, Wait};
use crate::reconciler::error::{Error, is_not_found};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::{FIELD_MANAGER, FINALIZER};

/// Carries out `plan` on the Machine's `cluster` (`None`: it cannot be worked on, and the plan
/// touches nothing there), in order; an error while the rest waits for a VMI or an unproven VM
/// (the controller retries with backoff, and the VMI's deletion triggers a run).
pub async fn execute(
    ctx: &Context,
    cluster: Option<&Cluster>,
    machine: &Machine,
    plan: &Plan,
) -> Result<(), Error> {
    let ns = machine.namespace().ok_or(Error::NoNamespace)?;
    for action in &plan.actions {
        match action {
            Action::Delete {
                kind,
                name,
                uid,
                reason,
            } => {
                let client = &cluster.ok_or(Error::NoCluster)?.client;
                delete(client, &ns, *kind, name, uid.clone()).await?;
                tracing::info!(object = %name, kind = kind.as_str(), ?reason, "deleted");
            }
            Action::Release { release, reason } => {
                tracing::debug!(object = %release.name, ?reason, "keeping");
                let client = &cluster.ok_or(Error::NoCluster)?.client;
                disks::release(client, &ns, release).await?;
            }
            Action::Keep { kind, name, reason } => {
                tracing::debug!(object = %name, kind = kind.as_str(), ?reason, "left alone");
            }
        }
    }
    if cluster.is_none() && plan.remove_finalizer {
        tracing::warn!(
            "cluster unavailable and vitistack.io/abandon-remote is \"true\": the Machine goes, what it made there stays"
        );
    }
    finish(ctx, machine, plan).await
}

/// The end of a plan: the VMI or unproven VM it waits for (an error), or the finalizer removed
/// and what is remembered of the Machine forgotten.
async fn finish(ctx: &Context, machine: &Machine, plan: &Plan) -> Result<(), Error> {
    let ns = machine.namespace().ok_or(Error::NoNamespace)?;
    let name = machine.name_any();
    match plan.wait {
        Some(Wait::Vmi) => return Err(Error::VmiStillRunning(format!("{ns}/{name}"))),
        Some(Wait::UnprovenVm) => return Err(Error::RemoteVmUnproven(format!("{ns}/{name}"))),
        Some(Wait::Restore) => tracing::info!("deletion waits for the restore holding the Machine"),
        Some(Wait::Cluster) | None => {}
    }
    if plan.remove_finalizer {
        remove(&Api::namespaced(ctx.client.clone(), &ns), machine).await?;
        ctx.per_machine.forget(&format!("{ns}/{name}"));
        tracing::info!("cleanup finished, finalizer removed");
    }
    Ok(())
}

/// Adds our finalizer to a Machine stored without it.
pub async fn add_finalizer(api: &Api<Machine>, machine: &Machine) -> Result<(), kube::Error> {
    let mut list = machine.finalizers().to_vec();
    list.push(FINALIZER.to_owned());
    set_finalizers(api, machine, list).await
}

async fn remove(api: &Api<Machine>, machine: &Machine) -> Result<(), kube::Error> {
    let list: Vec<String> = (machine.finalizers().iter())
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    match set_finalizers(api, machine, list).await {
        Err(e) if is_not_found(&e) => Ok(()),
        other => other,
    }
}

/// Writes the Machine's finalizers, guarded by the resourceVersion they were computed from: a
/// concurrent change is a conflict (retried) rather than lost.
async fn set_finalizers(
    api: &Api<Machine>,
    machine: &Machine,
    list: Vec<String>,
) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {
        "finalizers": list,
        "resourceVersion": machine.resource_version(),
    }});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patch = Patch::Merge(patch);
    api.patch(&machine.name_any(), &params, &patch)
        .await
        .map(drop)
}
