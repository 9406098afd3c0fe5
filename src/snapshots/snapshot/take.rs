//! Taking a snapshot on its workload cluster: the VirtualMachineSnapshot observed there, and
//! made when it is not (only of a VM proven the Machine's).

use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};

use super::super::context::{Context, NO_KUBEVIRT_SNAPSHOTS};
use super::super::error::Error;
use super::super::mirror;
use super::super::workload::Workload;
use super::{MACHINE_UID_ANNOTATION, TAKEN_OF_ANNOTATION, age, made_for, remote, taken_proof};
use crate::api::Machine;
use crate::api::names::FIELD_MANAGER;
use crate::api::snapshots::{MachineSnapshot, MachineSnapshotStatus};
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::snapshot::{
    TypedLocalObjectReference, VirtualMachineSnapshot, VirtualMachineSnapshotSpec,
};
use crate::reconciler::decide::desired::meta::machine_labels;
use crate::reconciler::decide::ownership::{self, MachineRef, Ownership};

/// What the MachineSnapshot's VirtualMachineSnapshot is to it.
enum Found {
    Absent,
    Ours(Box<VirtualMachineSnapshot>),
    /// Someone else's object of that name: never touched.
    Foreign,
}

/// The status from the VirtualMachineSnapshot on the workload cluster `w`, made if it is not
/// there yet; a remote cluster's name and identity recorded in it.
pub(super) async fn observe_and_take(
    s: &MachineSnapshot,
    ns: &str,
    ctx: &Context,
    w: &Workload,
    machine: Option<Machine>,
    previous: &MachineSnapshotStatus,
) -> Result<MachineSnapshotStatus, Error> {
    let name = s.name_any();
    let vm_snapshots: Api<VirtualMachineSnapshot> = Api::namespaced(w.client.clone(), ns);
    let found = match vm_snapshots.get_opt(&name).await? {
        None => Found::Absent,
        Some(v) if made_for(&w.key, s, &v, w.is_remote()) => Found::Ours(Box::new(v)),
        Some(_) => Found::Foreign,
    };
    let mut status = match found {
        Found::Ours(v) => {
            // Recorded on it when made: a status written from a stale copy cannot lose it.
            let uid = v.annotations().get(MACHINE_UID_ANNOTATION).cloned();
            mirror::status(
                Some(&v),
                previous.machine_uid.clone().or(uid).as_deref(),
                None,
                None,
            )
        }
        Found::Foreign => mirror::status(
            None,
            previous.machine_uid.as_deref(),
            None,
            Some(format!(
                "VirtualMachineSnapshot {name} exists and is not this MachineSnapshot's"
            )),
        ),
        // Never made again once it was: a snapshot deleted under us stays failed.
        Found::Absent if previous.virtual_machine_snapshot_name.is_some() => mirror::status(
            None,
            previous.machine_uid.as_deref(),
            None,
            Some(format!("VirtualMachineSnapshot {name} was deleted")),
        ),
        Found::Absent => take(s, ns, ctx, w, machine).await?,
    };
    if let Some((cluster, identity)) = &w.remote {
        status.cluster = Some(cluster.clone());
        status.cluster_identity = Some(identity.clone());
    }
    Ok(status)
}

/// Makes the VirtualMachineSnapshot of the Machine's VM on the workload cluster `w`, if the VM
/// is the Machine's own. On a remote cluster the MachineSnapshot first gets its finalizer and
/// the cluster recorded in its status (then it is deleted there with it), and the snapshot is
/// made at the next look.
async fn take(
    s: &MachineSnapshot,
    ns: &str,
    ctx: &Context,
    w: &Workload,
    machine: Option<Machine>,
) -> Result<MachineSnapshotStatus, Error> {
    let machine_name = s.spec.machine_name.as_str();
    let machine = match machine {
        Some(m) => Some(m),
        None => {
            Api::<Machine>::namespaced(ctx.client.clone(), ns)
                .get_opt(machine_name)
                .await?
        }
    };
    let Some(machine) = machine else {
        let why = format!("Machine {machine_name} not found");
        return Ok(mirror::status(None, None, None, Some(why)));
    };
    let machine_uid = machine.uid();
    let vm = Api::<VirtualMachine>::namespaced(w.client.clone(), ns)
        .get_opt(machine_name)
        .await?;
    match ownership::of(vm.as_ref(), MachineRef::of(&machine), &w.key) {
        Ownership::Ours => {}
        Ownership::Absent => {
            let limit = ctx.settings.limits.pending_limit;
            if mirror::waiting(age(s, ctx), limit) == mirror::Waiting::GiveUp {
                return Ok(mirror::gave_up(machine_name, machine_uid.as_deref(), limit));
            }
            let why = format!("Machine {machine_name} has no VM yet");
            return Ok(mirror::status(
                None,
                machine_uid.as_deref(),
                Some(why),
                None,
            ));
        }
        _ => {
            let why = format!("VirtualMachine {machine_name} is not the Machine's");
            return Ok(mirror::status(
                None,
                machine_uid.as_deref(),
                None,
                Some(why),
            ));
        }
    }
    let recorded = s.status.as_ref().and_then(|st| st.cluster.as_ref());
    if w.is_remote() && (!remote::held(s) || recorded.is_none()) {
        remote::hold(ctx, s).await?;
        let why = "recording the cluster it is taken on".to_owned();
        return Ok(mirror::status(
            None,
            machine_uid.as_deref(),
            Some(why),
            None,
        ));
    }
    let (owner_references, _) = w.owned_by(s, "MachineSnapshot");
    let snapshot = VirtualMachineSnapshot {
        metadata: ObjectMeta {
            name: Some(s.name_any()),
            namespace: Some(ns.to_owned()),
            labels: Some(machine_labels(machine_name)),
            annotations: machine_uid.clone().map(|uid| {
                let proof = taken_proof(&ctx.key, s, &uid);
                [
                    (MACHINE_UID_ANNOTATION.to_owned(), uid),
                    (TAKEN_OF_ANNOTATION.to_owned(), proof),
                ]
                .into()
            }),
            owner_references,
            ..ObjectMeta::default()
        },
        spec: VirtualMachineSnapshotSpec {
            source: TypedLocalObjectReference::vm(machine_name),
            deletion_policy: None,
        },
        status: None,
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let made = match Api::<VirtualMachineSnapshot>::namespaced(w.client.clone(), ns)
        .create(&params, &snapshot)
        .await
    {
        Ok(made) => made,
        // KubeVirt's snapshot API not served there.
        Err(kube::Error::Api(e)) if e.code == 404 && w.is_remote() => {
            let why = format!("{NO_KUBEVIRT_SNAPSHOTS} (on the Machine's cluster)");
            return Ok(mirror::status(
                None,
                machine_uid.as_deref(),
                None,
                Some(why),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let cluster = w.remote.as_ref().map(|(c, _)| c.as_str());
    tracing::info!(snapshot = %s.name_any(), namespace = %ns, machine = %machine_name, ?cluster, "VirtualMachineSnapshot created");
    Ok(mirror::status(
        Some(&made),
        machine_uid.as_deref(),
        None,
        None,
    ))
}
