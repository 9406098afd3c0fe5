//! Carries out one restore step: a write to the VM, a claim, the VirtualMachineRestore, and the
//! restore's status.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, TypedLocalObjectReference,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use super::super::context::Context;
use super::super::error::Error;
use super::super::restore::{Step, phase};
use super::{Observed, RESTORE_FIELD_MANAGER, recorded, write_status};
use crate::api::names::PROOF_ANNOTATION;
use crate::api::operations::RUN_STRATEGY_HALTED;
use crate::api::snapshots::MachineRestore;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::snapshot::{
    TypedLocalObjectReference as Target, VirtualMachineRestore, VirtualMachineRestoreSpec,
    VolumeRestoreOverride,
};
use crate::reconciler::decide::desired::meta::{controller_ref, machine_labels};
use crate::reconciler::decide::evidence::Target as ProofTarget;
use crate::reconciler::decide::retains_disks;

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
                    let swaps = super::restore::swaps(view, machine_name, &uid, &o.claim_views);
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
            let claim = again(ctx, o, &name, &from)?;
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
            made(pvcs.create(&created(), &claim).await)?;
            tracing::info!(restore = %r.name_any(), claim = %name, from = %from, "claim made again from its restored claim");
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

/// Claim `name` made again as a clone of the restored claim `from`: the restored claim's modes
/// and class, the replaced claim's size (never smaller), the Machine's labels, controller
/// reference (unless it retains its disks) and made-for proof, as the reconciler makes claims.
fn again(
    ctx: &Context,
    o: &Observed,
    name: &str,
    from: &str,
) -> Result<PersistentVolumeClaim, Error> {
    let machine = o
        .machine
        .as_ref()
        .ok_or_else(|| Error::MachineGone(o.restore.spec.machine_name.clone()))?;
    let source = o
        .claims
        .get(from)
        .and_then(|c| c.spec.clone())
        .unwrap_or_default();
    let restored_size =
        (source.resources.as_ref()).and_then(|r| r.requests.as_ref()?.get("storage").cloned());
    let recorded_size = (o.restore.status.as_ref())
        .and_then(|s| s.disks.iter().find(|d| d.restored_claim == from))
        .and_then(|d| d.size.clone())
        .map(Quantity);
    let size = larger(restored_size, recorded_size);
    let ns = machine.namespace().unwrap_or_default();
    let machine_name = machine.name_any();
    let proof = ctx.key.proof(
        &ProofTarget {
            kind: "PersistentVolumeClaim",
            namespace: &ns,
            name,
        },
        &machine_name,
        &machine.uid().unwrap_or_default(),
    );
    Ok(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns),
            labels: Some(machine_labels(&machine_name)),
            annotations: Some(BTreeMap::from([(PROOF_ANNOTATION.to_owned(), proof)])),
            owner_references: (!retains_disks(machine))
                .then(|| controller_ref(machine).map(|c| vec![c]))
                .flatten(),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: source.access_modes,
            storage_class_name: source.storage_class_name,
            volume_mode: source.volume_mode,
            resources: Some(VolumeResourceRequirements {
                requests: size.map(|s| BTreeMap::from([("storage".to_owned(), s)])),
                ..VolumeResourceRequirements::default()
            }),
            data_source: Some(TypedLocalObjectReference {
                api_group: None,
                kind: "PersistentVolumeClaim".to_owned(),
                name: from.to_owned(),
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    })
}

/// The larger of two sizes; one that does not parse loses.
fn larger(a: Option<Quantity>, b: Option<Quantity>) -> Option<Quantity> {
    let amount = |q: &Quantity| crate::api::Quantity(q.0.clone()).parse().ok();
    match (a, b) {
        (Some(a), Some(b)) => Some(if amount(&b) > amount(&a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_larger_size_wins() {
        let q = |s: &str| Some(Quantity(s.to_owned()));
        assert_eq!(larger(q("1Gi"), q("2Gi")), q("2Gi"));
        assert_eq!(larger(q("2048Mi"), q("1Gi")), q("2048Mi"));
        assert_eq!(larger(None, q("1Gi")), q("1Gi"));
        assert_eq!(larger(q("1Gi"), q("junk")), q("1Gi"));
    }
}
