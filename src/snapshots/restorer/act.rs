//! Carries out one restore step: a write to the VM, a claim, the VirtualMachineRestore, and the
//! restore's status.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use super::super::context::Context;
use super::super::error::Error;
use super::super::restore::{Step, phase};
use super::{Observed, RESTORE_FIELD_MANAGER, again, recorded, write_status};
use crate::api::operations::RUN_STRATEGY_HALTED;
use crate::api::snapshots::MachineRestore;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::snapshot::{
    TypedLocalObjectReference as Target, VirtualMachineRestore, VirtualMachineRestoreSpec,
    VolumeRestoreOverride,
};
use crate::reconciler::decide::desired::meta::{controller_ref, machine_labels};

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

pub async fn act(ctx: &Context, o: &Observed, step: Step) -> Result<(), Error> {
    let r = &o.restore;
    let ns = r.namespace().unwrap_or_default();
    let client = &ctx.client;
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
            let vm_restore = VirtualMachineRestore {
                metadata: ObjectMeta {
                    name: Some(r.name_any()),
                    namespace: Some(ns.clone()),
                    labels: Some(machine_labels(machine_name)),
                    owner_references: controller_ref(r).map(|c| vec![c]),
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
            made(api.create(&created(), &vm_restore).await)?;
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
            let claim = again::claim(ctx, o, &name, &from)?;
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
            made(pvcs.create(&created(), &claim).await)?;
            tracing::info!(restore = %r.name_any(), claim = %name, from = %from, "claim made again from its restored claim");
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
            let dv = again::data_volume(ctx, o, &name, &from)?;
            let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &ns);
            made(dvs.create(&created(), &dv).await)?;
            tracing::info!(restore = %r.name_any(), data_volume = %name, from = %from, "DataVolume made again, a clone of its restored claim");
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
    write_status(client, r, &status).await
}

/// Fails a restore that cannot even begin (nothing observed, nothing written but its status).
pub async fn fail_only(ctx: &Context, r: &MachineRestore, step: Step) -> Result<(), Error> {
    let Step::Fail(why) = step else {
        return Ok(());
    };
    let mut status = r.status.clone().unwrap_or_default();
    status.phase = Some(phase::FAILED.to_owned());
    status.completed_at = Some(Time(Timestamp::now()));
    status.error = Some(why);
    write_status(&ctx.client, r, &status).await
}
