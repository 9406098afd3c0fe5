//! The MachineRestore controller: observe ([`observe`]: the restore, the Machine, its VM, VMI and
//! claims, the snapshot and the VirtualMachineRestore) → decide ([`restore::next`], pure) → act
//! ([`act`]: one step per reconcile, then look again). The VM, its disks, the
//! VirtualMachineRestore and the binder Pod are read and written on the Machine's cluster
//! ([`super::workload`]); on a remote one what the restore makes carries a proof bound to the
//! MachineRestore instead of an owner reference, and its VirtualMachineRestore is deleted when
//! the restore lets go.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::restore::{self, ClaimView, MachineView, Seen, Step, VmView, phase};
use super::snapshot::scoped;
use super::workload::Workload;
use crate::api::Machine;
use crate::api::names::pvc_name;
use crate::api::operations::{RUN_STRATEGY_HALTED, run_strategy};
use crate::api::snapshots::{
    MachineRestore, MachineRestoreStatus, MachineSnapshot, RESTORE_FINALIZER, RestoredDisk,
};
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::snapshot::VirtualMachineRestore;
use crate::reconciler::decide::ownership::{self, MachineRef, Ownership};
use crate::reconciler::run::watches::Scope;

mod act;
mod again;
mod binder;
mod observe;
use observe::observe;

/// The field manager of the restore's own writes (the VM's run strategy while it is stopped, the
/// claims it makes again): the reconciler's later applies never remove what only this one set
/// (a claim's `dataSource`).
pub const RESTORE_FIELD_MANAGER: &str = "kubevirt-operator-restore";

/// The owner kind of what a restore makes on a remote cluster (its proof, see
/// [`Workload::owned_by`]).
pub const RESTORE_KIND: &str = "MachineRestore";

pub async fn run(
    ctx: Arc<Context>,
    scope: &Scope,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let restores = scoped::<MachineRestore>(&ctx.client, scope);
    let mut controller = Controller::new(restores, watcher::Config::default());
    if ctx.kubevirt {
        let vm_restores = scoped::<VirtualMachineRestore>(&ctx.client, scope);
        controller = controller.owns(vm_restores, watcher::Config::default());
    }
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "MachineRestore reconcile");
            }
        })
        .await;
}

fn error_policy(r: Arc<MachineRestore>, e: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(restore = %r.name_any(), error = %e, "MachineRestore reconcile failed");
    Action::requeue(ctx.settings.tick)
}

/// What one reconcile observed, owned (`Seen` borrows from it).
pub struct Observed {
    pub restore: MachineRestore,
    pub machine: Option<Machine>,
    pub view: Option<MachineView>,
    pub snapshot: Option<MachineSnapshot>,
    /// The uid of the Machine the operator proves it took the snapshot of (looked up only for
    /// a restore allowing an earlier Machine's snapshot, while `Pending`).
    pub snapshot_proven_of: Option<String>,
    pub vm: Option<VirtualMachine>,
    pub vm_ours: bool,
    pub vmi: bool,
    pub vm_restore: Option<VirtualMachineRestore>,
    pub vm_restore_ours: bool,
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    pub claim_views: BTreeMap<String, ClaimView>,
    pub data_volume_views: BTreeMap<String, ClaimView>,
    pub another: Option<String>,
    pub no_snapshot_api: bool,
    pub binder: Option<restore::Binder>,
    /// Where the Machine's VM and disks are: everything but the Machine, its snapshot and its
    /// restores is read and written there.
    pub workload: Workload,
    /// Why the snapshot is not on that cluster ([`super::site::elsewhere`]).
    pub elsewhere: Option<String>,
}

async fn reconcile(r: Arc<MachineRestore>, ctx: Arc<Context>) -> Result<Action, Error> {
    let current = r.status.as_ref().and_then(|s| s.phase.as_deref());
    let held = (r.finalizers().iter()).any(|f| f == RESTORE_FINALIZER);
    // Ended and let go (or ended before restores had a finalizer): nothing left to do.
    if !held
        && (r.meta().deletion_timestamp.is_some()
            || matches!(current, Some(phase::SUCCEEDED | phase::FAILED)))
    {
        return Ok(Action::await_change());
    }
    if restore::needs_finalizer(&r) {
        act::hold(&ctx, &r).await?;
        return Ok(Action::requeue(ctx.settings.tick));
    }
    let o = match observe(&r, &ctx).await? {
        Ok(o) => o,
        // Its Machine's cluster cannot be worked on: nothing is done anywhere, the status
        // says why, in the step it is in.
        Err(why) => {
            let mut status = r.status.clone().unwrap_or_default();
            status
                .phase
                .get_or_insert_with(|| phase::PENDING.to_owned());
            status.error = Some(format!("{} ({})", why.message, why.reason));
            write_status(&ctx.client, &r, &status).await?;
            return Ok(Action::requeue(ctx.settings.tick));
        }
    };
    let step = decide(&o);
    tracing::debug!(restore = %r.name_any(), ?step, "restore step");
    act::act(&ctx, &o, step).await?;
    Ok(Action::requeue(ctx.settings.tick))
}

/// [`restore::next`], after the checks on what is not the Machine's.
pub fn decide(o: &Observed) -> Step {
    let name = &o.restore.spec.machine_name;
    let current = o.restore.status.as_ref().and_then(|s| s.phase.as_deref());
    // Without the Machine nothing is proven its own: the steps say what that means.
    if o.vm.is_some() && !o.vm_ours && o.machine.is_some() {
        let why = format!("VirtualMachine {name} is not the Machine's");
        if let Some(step) = restore::refuse(current, why) {
            return step;
        }
    }
    if let Some(why) = &o.elsewhere
        && let Some(step) = restore::refuse(current, why.clone())
    {
        return step;
    }
    if o.vm_restore.is_some() && !o.vm_restore_ours {
        let why = format!(
            "VirtualMachineRestore {} exists and is not this restore's",
            o.restore.name_any()
        );
        if let Some(step) = restore::refuse(current, why) {
            return step;
        }
    }
    let vm = o.vm.as_ref().map(|vm| VmView {
        uid: vm.uid().unwrap_or_default(),
        runs: vm.spec.run_strategy.as_deref() != Some(RUN_STRATEGY_HALTED),
        claims: vm
            .spec
            .template
            .spec
            .volumes
            .iter()
            .filter_map(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .map(|p| p.claim_name.clone())
                    .or_else(|| v.data_volume.as_ref().map(|d| d.name.clone()))
            })
            .collect(),
    });
    restore::next(&Seen {
        restore: Some(&o.restore),
        machine: o.view.clone(),
        snapshot: o.snapshot.as_ref(),
        snapshot_proven_of: o.snapshot_proven_of.clone(),
        vm,
        vmi: o.vmi,
        vm_restore: o.vm_restore.as_ref(),
        claims: o.claim_views.clone(),
        data_volumes: o.data_volume_views.clone(),
        another: o.another.clone(),
        no_snapshot_api: o.no_snapshot_api,
        binder: o.binder.clone(),
    })
}

/// The disks of the restore: as recorded once it began, else as the VM mounts them (a claim
/// `<machine>-<volume>` is a blank disk, a DataVolume `<machine>-<volume>` a disk with a source,
/// or a CD-ROM when the VM's drive of that name is one).
pub(super) fn machine_view(
    machine: &Machine,
    vm: Option<&VirtualMachine>,
    status: &MachineRestoreStatus,
) -> MachineView {
    let name = machine.name_any();
    let mut view = MachineView {
        uid: machine.uid().unwrap_or_default(),
        deleting: machine.meta().deletion_timestamp.is_some(),
        wants_running: run_strategy(machine.spec.run_strategy.as_deref(), machine.spec.running)
            != RUN_STRATEGY_HALTED,
        ..MachineView::default()
    };
    if !status.disks.is_empty() {
        for d in &status.disks {
            let list = if d.data_volume {
                &mut view.sourced
            } else {
                &mut view.disks
            };
            list.push(d.name.clone());
        }
        return view;
    }
    let Some(vm) = vm else {
        return view;
    };
    let spec = &vm.spec.template.spec;
    let cdrom = |volume: &str| {
        (spec.domain.devices.disks.iter()).any(|d| d.name == volume && d.cdrom.is_some())
    };
    for v in &spec.volumes {
        let own = pvc_name(&name, &v.name);
        if v.data_volume.as_ref().is_some_and(|d| d.name == own) {
            if cdrom(&v.name) {
                view.cdroms.push(v.name.clone());
            } else {
                view.sourced.push(v.name.clone());
            }
        } else if v
            .persistent_volume_claim
            .as_ref()
            .is_some_and(|p| p.claim_name == own)
        {
            view.disks.push(v.name.clone());
        }
    }
    view
}

/// Whose `obj` is, for the Machine (none: nothing is).
pub(super) fn of<K: Resource<DynamicType = ()>>(
    obj: &K,
    machine: Option<&Machine>,
    key: &crate::reconciler::decide::evidence::OwnershipKey,
) -> Ownership {
    machine.map_or(Ownership::Absent, |m| {
        ownership::of(Some(obj), MachineRef::of(m), key)
    })
}

/// Writes `status` (every field: one unset now is cleared).
pub async fn write_status(
    client: &kube::Client,
    r: &MachineRestore,
    status: &MachineRestoreStatus,
) -> Result<(), Error> {
    // An error longer than the CRD allows would fail every write (KubeVirt's messages, the
    // names of many lost claims): cut to fit.
    let status = &MachineRestoreStatus {
        error: status.error.clone().map(super::mirror::cut),
        ..status.clone()
    };
    if r.status.as_ref() == Some(status) {
        return Ok(());
    }
    let ns = r.namespace().unwrap_or_default();
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        for f in [
            "phase",
            "wasRunning",
            "completedAt",
            "error",
            "disks",
            "machineUid",
        ] {
            obj.entry(f).or_insert(serde_json::Value::Null);
        }
    }
    let params = PatchParams {
        field_manager: Some(crate::api::names::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    Api::<MachineRestore>::namespaced(client.clone(), &ns)
        .patch_status(
            &r.name_any(),
            &params,
            // Guarded by the version decided from: a stale status never overwrites a newer one
            // (the uid of a disk made again, recorded in between).
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": r.resource_version()},
                "status": value,
            })),
        )
        .await?;
    Ok(())
}

/// The disks recorded when adopting begins: each restored claim, and the claim it replaces.
pub fn recorded(o: &Observed, swaps: &[restore::DiskSwap]) -> Vec<RestoredDisk> {
    swaps
        .iter()
        .map(|s| RestoredDisk {
            name: s.disk.clone(),
            restored_claim: s.restored.clone(),
            previous_uid: s.previous_uid.clone(),
            data_volume: s.data_volume,
            volume_snapshot: s.volume_snapshot.clone(),
            restored_uid: s.restored_uid.clone(),
            // A grown disk with a source grew CDI's claim, never its DataVolume.
            size: o
                .claims
                .get(&pvc_name(&o.restore.spec.machine_name, &s.disk))
                .and_then(|c| {
                    c.spec
                        .as_ref()?
                        .resources
                        .as_ref()?
                        .requests
                        .as_ref()?
                        .get("storage")
                })
                .map(|q| q.0.clone()),
            ..RestoredDisk::default()
        })
        .collect()
}
