//! Carries out one restore step: a write to the VM, a claim, the VirtualMachineRestore, and the
//! restore's status.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use super::super::context::Context;
use super::super::context::NO_KUBEVIRT_SNAPSHOTS;
use super::super::error::Error;
use super::super::restore::binder as restore_binder;
use super::super::restore::{Step, phase};
use super::{Observed, RESTORE_FIELD_MANAGER, RESTORE_KIND, again, binder, recorded, write_status};
use crate::api::operations::RUN_STRATEGY_HALTED;
use crate::api::snapshots::{MachineRestore, RESTORE_FINALIZER};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::snapshot::{
    TypedLocalObjectReference as Target, VirtualMachineRestore, VirtualMachineRestoreSpec,
    VolumeRestoreOverride,
};
use crate::reconciler::decide::desired::meta::machine_labels;

fn created() -> PostParams {
    PostParams {
        field_manager: Some(RESTORE_FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// Ok on "already exists": an earlier reconcile made it.
fn made<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// What was just made, or `None` when the name was taken ("already exists").
fn fresh<T>(r: Result<T, kube::Error>) -> Result<Option<T>, Error> {
    match r {
        Ok(made) => Ok(Some(made)),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub async fn act(ctx: &Context, o: &Observed, step: Step) -> Result<(), Error> {
    let r = &o.restore;
    let ns = r.namespace().unwrap_or_default();
    // The Machine's cluster: the VM, its disks, the VirtualMachineRestore, the binder Pod.
    let w = &o.workload;
    let client = &w.client;
    let mut status = r.status.clone().unwrap_or_default();
    let machine_name = r.spec.machine_name.as_str();
    match step {
        Step::Wait { phase, why } => {
            status.phase = Some(phase.to_owned());
            status.error = why;
        }
        Step::StopVm { was_running } => {
            let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), &ns);
            let patch = json!({"spec": {"runStrategy": RUN_STRATEGY_HALTED}});
            let params = PatchParams {
                field_manager: Some(RESTORE_FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            vms.patch(machine_name, &params, &Patch::Merge(patch))
                .await?;
            if status.phase.as_deref() != Some(phase::STOPPING) {
                tracing::info!(restore = %r.name_any(), machine = %machine_name, was_running, "stopping the VM for a restore");
                status.was_running = Some(was_running);
                status.machine_uid = o.view.as_ref().map(|m| m.uid.clone());
                if let Some(view) = &o.view {
                    let uid = r.uid().unwrap_or_default();
                    let swaps = super::restore::swaps(
                        view,
                        machine_name,
                        &uid,
                        &o.claim_views,
                        &o.data_volume_views,
                    );
                    status.disks = recorded(o, &swaps);
                }
            }
            status.phase = Some(phase::STOPPING.to_owned());
            status.error = None;
        }
        Step::Advance(next) => {
            status.phase = Some(next.to_owned());
            status.error = None;
        }
        Step::CreateVmRestore { overrides } => {
            let snapshot = (o.snapshot.as_ref())
                .and_then(|s| s.status.as_ref()?.virtual_machine_snapshot_name.clone())
                .unwrap_or_else(|| r.spec.snapshot_name.clone());
            let (owner_references, proof) = w.owned_by(r, RESTORE_KIND);
            let vm_restore = VirtualMachineRestore {
                metadata: ObjectMeta {
                    name: Some(r.name_any()),
                    namespace: Some(ns.clone()),
                    labels: Some(machine_labels(machine_name)),
                    owner_references,
                    annotations: proof.map(|p| [p].into()),
                    ..ObjectMeta::default()
                },
                spec: VirtualMachineRestoreSpec {
                    target: Target::vm(machine_name),
                    virtual_machine_snapshot_name: snapshot,
                    volume_restore_overrides: overrides
                        .into_iter()
                        .map(|(volume_name, restore_name)| VolumeRestoreOverride {
                            volume_name,
                            restore_name: Some(restore_name),
                        })
                        .collect(),
                },
                status: None,
            };
            let api: Api<VirtualMachineRestore> = Api::namespaced(client.clone(), &ns);
            match api.create(&created(), &vm_restore).await {
                // KubeVirt's snapshot API not served on the Machine's cluster.
                Err(kube::Error::Api(e)) if e.code == 404 && w.is_remote() => {
                    let why = format!("{NO_KUBEVIRT_SNAPSHOTS} (on the Machine's cluster)");
                    status.phase = Some(phase::FAILED.to_owned());
                    status.completed_at = Some(Time(Timestamp::now()));
                    status.error = Some(why);
                    return write_status(&ctx.client, r, &status).await;
                }
                other => made(other)?,
            }
            tracing::info!(restore = %r.name_any(), machine = %machine_name, "VirtualMachineRestore created");
            status.phase = Some(phase::RESTORING.to_owned());
            status.error = Some("KubeVirt is restoring the disks".to_owned());
        }
        Step::BeginAdopting(swaps) => {
            status.disks = recorded(o, &swaps);
            status.phase = Some(phase::ADOPTING.to_owned());
            status.error = None;
        }
        Step::DeleteClaim { name, uid } => {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
            let dp = DeleteParams::default().preconditions(Preconditions {
                uid: Some(uid),
                resource_version: None,
            });
            match pvcs.delete(&name, &dp).await {
                Ok(_) => {
                    tracing::info!(restore = %r.name_any(), claim = %name, "replaced claim deleted")
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Step::CreateClaim { name, from } => {
            let mut claim = again::claim(ctx, o, &name, &from)?;
            if w.is_remote() {
                claim.metadata.owner_references = None; // the Machine is not on that cluster
            }
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
            // Taken meanwhile: not recorded, seen as a stranger's next time.
            let Some(claim) = fresh(pvcs.create(&created(), &claim).await)? else {
                return Ok(());
            };
            tracing::info!(restore = %r.name_any(), claim = %name, from = %from, "claim made again from its restored claim");
            return record_made(ctx, r, &from, claim.uid()).await;
        }
        Step::DeleteDataVolume { name, uid } => {
            let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &ns);
            // In the background: the garbage collector then takes CDI's claim, waited for.
            let dp = DeleteParams::background().preconditions(Preconditions {
                uid: Some(uid),
                resource_version: None,
            });
            match dvs.delete(&name, &dp).await {
                Ok(_) => {
                    tracing::info!(restore = %r.name_any(), data_volume = %name, "replaced DataVolume deleted")
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Step::CreateDataVolume { name, from } => {
            let mut dv = again::data_volume(ctx, o, &name, &from)?;
            if w.is_remote() {
                dv.metadata.owner_references = None;
            }
            let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &ns);
            let Some(dv) = fresh(dvs.create(&created(), &dv).await)? else {
                return Ok(());
            };
            tracing::info!(restore = %r.name_any(), data_volume = %name, from = %from, "DataVolume made again, a clone of its restored claim");
            return record_made(ctx, r, &from, dv.uid()).await;
        }
        Step::Bind(claims) => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let mut pod = binder::pod(r, &claims, &ctx.settings.pause_image);
            let (owner_references, proof) = w.owned_by(r, RESTORE_KIND);
            pod.metadata.owner_references = owner_references;
            pod.metadata.annotations = proof.map(|p| [p].into());
            made(pods.create(&created(), &pod).await)?;
            tracing::info!(restore = %r.name_any(), ?claims, "consumer Pod made to bind the claims");
        }
        Step::Unbind(uid) => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let dp = DeleteParams::default().preconditions(Preconditions {
                uid: Some(uid),
                resource_version: None,
            });
            let name = restore_binder::name(&r.name_any());
            match pods.delete(&name, &dp).await {
                Ok(_) => {
                    tracing::info!(restore = %r.name_any(), pod = %name, "claims bound: consumer Pod deleted")
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Step::Release => {
            // On a remote cluster no garbage collector follows the MachineRestore: its
            // VirtualMachineRestore goes now (the binder Pod went before it ended).
            if w.is_remote()
                && o.vm_restore_ours
                && let Some(uid) = o.vm_restore.as_ref().and_then(|v| v.uid())
            {
                let api: Api<VirtualMachineRestore> = Api::namespaced(client.clone(), &ns);
                let dp = DeleteParams::default().preconditions(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                });
                match api.delete(&r.name_any(), &dp).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let api: Api<MachineRestore> = Api::namespaced(ctx.client.clone(), &ns);
            let kept: Vec<String> = (r.finalizers().iter())
                .filter(|f| *f != RESTORE_FINALIZER)
                .cloned()
                .collect();
            let patch = json!({"metadata": {
                "finalizers": kept, "resourceVersion": r.resource_version()}});
            api.patch(&r.name_any(), &PatchParams::default(), &Patch::Merge(patch))
                .await?;
            tracing::info!(restore = %r.name_any(), "restore ended with every disk present: finalizer removed");
            return Ok(());
        }
        Step::Succeed => {
            status.phase = Some(phase::SUCCEEDED.to_owned());
            status.completed_at = Some(Time(Timestamp::now()));
            status.error = None;
            tracing::info!(restore = %r.name_any(), machine = %machine_name, "restore succeeded");
        }
        Step::Fail(why) => {
            tracing::warn!(restore = %r.name_any(), machine = %machine_name, error = %why, "restore failed");
            status.phase = Some(phase::FAILED.to_owned());
            status.completed_at = Some(Time(Timestamp::now()));
            status.error = Some(why);
        }
    }
    write_status(&ctx.client, r, &status).await
}

/// Puts the restore's finalizer on (guarded by the version read: a concurrent change retries).
pub async fn hold(ctx: &Context, r: &MachineRestore) -> Result<(), Error> {
    let mut list = r.finalizers().to_vec();
    list.push(RESTORE_FINALIZER.to_owned());
    let patch = json!({"metadata": {"finalizers": list, "resourceVersion": r.resource_version()}});
    Api::<MachineRestore>::namespaced(ctx.client.clone(), &r.namespace().unwrap_or_default())
        .patch(&r.name_any(), &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Records the uid of what was made again for the restored claim `from`: only that uid is the
/// restored disk. Read fresh and written guarded, retried on a conflict: losing it would leave
/// the disk taken for a stranger's (held, never mounted, until an admin deletes it).
async fn record_made(
    ctx: &Context,
    r: &MachineRestore,
    from: &str,
    uid: Option<String>,
) -> Result<(), Error> {
    let api: Api<MachineRestore> =
        Api::namespaced(ctx.client.clone(), &r.namespace().unwrap_or_default());
    let mut tries = 0;
    loop {
        let fresh = api.get(&r.name_any()).await?;
        let mut disks = fresh.status.clone().unwrap_or_default().disks;
        for d in disks.iter_mut().filter(|d| d.restored_claim == from) {
            d.made_uid.clone_from(&uid);
        }
        let patch = json!({
            "metadata": {"resourceVersion": fresh.resource_version()},
            "status": {"disks": disks},
        });
        match api
            .patch_status(&r.name_any(), &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 409 && tries < 5 => tries += 1,
            other => return other.map(drop).map_err(Into::into),
        }
    }
}
