//! Act: carry out a [`Decision`]: the claims, attachments and derived Secret at once, then the
//! VM only if all of those were written, then the deletions, the restart and their Events. What
//! was written is handed back: `run::status` computes the status from it, [`status`] writes it.
//! DataVolumes are written with the claims, and feed `status.disks[]` and `StorageReady`.
//!
//! This folder does I/O: it writes to the API server ([`apply`]), carries out the [`cleanup`]
//! plan, and publishes [`events`].

pub mod apply;
pub mod cleanup;
pub mod disks;
pub mod events;
pub mod remote;
pub mod remote_secrets;
mod restart;
pub mod secret;
pub mod status;

use crate::api::Machine;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::{Client, Resource, ResourceExt};

use crate::reconciler::act::apply::Prover;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::Decision;
use crate::reconciler::decide::held;
use crate::reconciler::decide::notices::Notice;
use crate::reconciler::decide::problem::{Kind, Problem};
use crate::reconciler::decide::restart_budget::Gate;
use crate::reconciler::decide::status::reason;
use crate::reconciler::error::{Error, api_message, is_not_found};
use crate::reconciler::observe::Observed;
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::watches::key_of;
use crate::reconciler::store::derived_secrets::Known;

fn failed(kind: Kind, name: String, e: &kube::Error) -> Problem {
    Problem::WriteFailed {
        kind,
        name,
        message: api_message(e),
    }
}

/// What carrying out a decision came to: what the status is computed from (`run::status`).
pub struct Acted {
    /// Everything that blocks the Machine, the refused writes included.
    pub problems: Vec<Problem>,
    /// The VM as written, or as observed when it is ours.
    pub vm: Option<VirtualMachine>,
    /// The blank disks' claims and the DataVolumes, as written.
    pub claims: Vec<PersistentVolumeClaim>,
    pub data_volumes: Vec<DataVolume>,
    /// What of the decision the status shows.
    pub retain: bool,
    pub restart: crate::reconciler::decide::restart::Restart,
    pub eviction: Option<crate::reconciler::decide::eviction::Eviction>,
    pub node: crate::reconciler::decide::node::Verdict,
    /// The restart budget's `RestartPending`, and when to look again (waiting, or restarting).
    pub restart_pending: Option<crate::reconciler::decide::restart_budget::Shown>,
    pub restart_recheck_in: Option<std::time::Duration>,
    pub hotplug: crate::reconciler::decide::hotplug::Plan,
}

/// Carries out `decision`, its restart as the restart `budget` let it.
pub async fn act(
    ctx: &Context,
    cluster: &Cluster,
    o: &Observed,
    (mut decision, budget): (Decision, Gate),
) -> Result<Acted, Error> {
    let machine = &o.machine;
    let ns = machine.namespace().unwrap_or_default();
    let client = &cluster.client;
    let written = &cluster.written;
    let machines: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    if decision.add_finalizer {
        cleanup::add_finalizer(&machines, machine).await?;
    }
    let machine_name = machine.name_any();
    let machine_uid = machine.uid().unwrap_or_default();
    let prover = Prover {
        key: &cluster.key,
        machine: &machine_name,
        machine_uid: &machine_uid,
    };
    let prover = &prover;
    // retain-disks first, and on its own: a spec write that fails below must not keep a
    // reference the garbage collector acts on.
    let mut problems = decision.problems;
    problems.extend(disks::release_all(client, &ns, &decision.release).await);
    problems.extend(disks::grow_all(client, &ns, &decision.grow_claims).await);

    // A remote Machine's credential copies first: a DataVolume naming one not in place waits.
    problems.extend(decision.copies.conflicts);
    let (copy_problems, held_dvs) =
        remote_secrets::write_all(cluster, &ns, decision.copies.writes, prover).await;
    problems.extend(copy_problems);
    (decision.data_volumes).retain(|dv| !held_dvs.contains(&dv.name_any()));
    // The derived Secret's write first, beside the claims'.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret_write = async {
        match decision.secret {
            None => Ok(()),
            Some(desired) => secret::ensure(ctx, cluster, o, desired, prover).await,
        }
    };
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let claim_writes = decision.claims.into_iter().map(|claim| {
        let pvcs = pvcs.clone();
        async move {
            let claim_name = claim.name_any();
            let live = o.claims.get(&claim_name).cloned();
            apply::ensure_proven(&pvcs, claim, live, &written.pvcs, prover)
                .await
                .map_err(|e| failed(Kind::Claim, claim_name, &e))
        }
    });
    let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &ns);
    let dv_writes = decision.data_volumes.into_iter().map(|dv| {
        let dvs = dvs.clone();
        async move {
            let dv_name = dv.name_any();
            let live = o.data_volumes.get(&dv_name).cloned();
            let clone = is_clone(&dv);
            apply::ensure_proven(&dvs, dv, live, &written.data_volumes, prover)
                .await
                .map_err(|e| data_volume_write_problem(dv_name, clone, &e))
        }
    });
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(client.clone(), &ns);
    let nad_writes = decision.attachments.into_iter().map(|nad| {
        let nads = nads.clone();
        async move {
            let nad_name = nad.name_any();
            let live = o.attachments.get(&nad_name).cloned();
            apply::ensure(&nads, nad, live, &written.nads)
                .await
                .map(drop)
                .map_err(|e| failed(Kind::Attachment, nad_name, &e))
        }
    });
    let (claims, data_volumes, attachments, secret) = futures::join!(
        futures::future::join_all(claim_writes),
        futures::future::join_all(dv_writes),
        futures::future::join_all(nad_writes),
        secret_write
    );
    let mut written_claims = Vec::new();
    for c in claims {
        match c {
            Ok(p) => {
                ctx.bind_times
                    .observe(&ctx.settings.metrics, &p, Timestamp::now());
                written_claims.push(p);
            }
            Err(p) => problems.push(p),
        }
    }
    let mut written_dvs = Vec::new();
    for d in data_volumes {
        match d {
            Ok(dv) => written_dvs.push(dv),
            Err(p) => problems.push(p),
        }
    }
    problems.extend(attachments.into_iter().filter_map(Result::err));
    problems.extend(secret.err());

    let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), &ns);
    let mut vm = (o.vm.clone()).filter(|_| decision.vm_ours);
    // A failed volume write holds back only the VM changes that need that volume.
    let failed_volumes: Vec<String> = (problems.iter())
        .filter_map(|p| p.failed_volume().map(str::to_owned))
        .collect();
    let failed_names: Vec<&str> = failed_volumes.iter().map(String::as_str).collect();
    let held = (decision.vm)
        .filter(|_| !problems.iter().any(Problem::holds_vm))
        .and_then(|desired| held::without_failed(desired, vm.as_ref(), &failed_names));
    // Every claim it mounts, attachment and Secret it names is in place, and ours.
    if let Some(desired) = held {
        let vm_name = desired.name_any();
        match apply::ensure_proven(&vms, desired, vm.clone(), &written.vms, prover).await {
            Ok(applied) => {
                vm = Some(applied);
                if let Some(uid) = decision.delete_derived_secret {
                    let derived = crate::reconciler::decide::desired::meta::derived_secret_name(
                        &machine.name_any(),
                    );
                    delete_exact(&secrets, &derived, uid).await?;
                    let memory = &ctx.per_machine.derived_secrets;
                    memory.remember(&key_of(machine), &machine_uid, Known::Absent);
                }
                for (kind, name, uid) in decision.delete_removed {
                    delete(client, &ns, kind, &name, uid).await?;
                    match kind {
                        Kind::DataVolume => {
                            tracing::info!(data_volume = %name, "deleted a removed CD-ROM's DataVolume")
                        }
                        _ => {
                            tracing::info!(object = %name, kind = kind.as_str(), "deleted a credential's copy")
                        }
                    }
                }
            }
            Err(e) => problems.push(failed(Kind::VirtualMachine, vm_name, &e)),
        }
    }
    for nad in decision.delete_attachments {
        if let Some(uid) = nad.uid() {
            delete_exact(&nads, &nad.name_any(), uid).await?;
            tracing::info!(attachment = %nad.name_any(), "deleted an attachment no Machine uses");
        }
    }
    // The adoptions and the restart announced at once (the adoptions even if the restart fails).
    let mut notices = adoption_notices(&decision.adopting, &problems);
    notices.extend(restart::waiting_notice(&budget));
    let restarted = restart::restart(cluster, &ns, &decision.restart).await;
    notices.extend(restarted.as_ref().ok().cloned().flatten());
    events::announce(&ctx.events, machine, notices);
    restarted?;

    Ok(Acted {
        problems,
        vm,
        claims: written_claims,
        data_volumes: written_dvs,
        retain: decision.retain,
        restart: decision.restart,
        eviction: decision.eviction,
        node: decision.node,
        restart_pending: budget.shown,
        restart_recheck_in: budget.recheck_in,
        hotplug: decision.hotplug,
    })
}

fn is_clone(dv: &DataVolume) -> bool {
    dv.spec.source_ref.is_some()
        || (dv.spec.source.as_ref()).is_some_and(|s| s.pvc.is_some() || s.snapshot.is_some())
}

/// A refused DataVolume write. CDI's admission refuses a clone its creator may not make with a
/// 403, or with a 422 saying "insufficient permissions" (its wording for a failed
/// `datavolumes/source` check): that is `CloneUnauthorized`; anything else `DataVolumeFailed`.
fn data_volume_write_problem(name: String, clone: bool, e: &kube::Error) -> Problem {
    match e {
        kube::Error::Api(s)
            if clone && (s.code == 403 || s.message.contains("insufficient permissions")) =>
        {
            Problem::CloneUnauthorized {
                name,
                message: s.message.clone(),
            }
        }
        _ => failed(Kind::DataVolume, name, e),
    }
}

/// A Normal Event for each released claim or DataVolume adopted (its write did not fail).
fn adoption_notices(adopting: &[(Kind, String)], problems: &[Problem]) -> Vec<Notice> {
    let notices: Vec<Notice> = adopting
        .iter()
        .filter(|(_, name)| !problems.iter().any(|p| p.failed_volume() == Some(name)))
        .map(|(kind, name)| Notice {
            type_: kube::runtime::events::EventType::Normal,
            reason: reason::ADOPTED.to_owned(),
            note: format!(
                "adopted {} {name}, released by this operator for a Machine of this name",
                kind.as_str()
            ),
        })
        .collect();
    if !notices.is_empty() {
        tracing::info!(objects = ?adopting, "adopted retained disks");
    }
    notices
}

/// Deletes the `kind` named `name` if it is still the object with `uid`.
pub async fn delete(
    client: &Client,
    ns: &str,
    kind: Kind,
    name: &str,
    uid: String,
) -> Result<(), Error> {
    fn api<K>(client: &Client, ns: &str) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        Api::namespaced(client.clone(), ns)
    }
    match kind {
        Kind::VirtualMachine => delete_exact(&api::<VirtualMachine>(client, ns), name, uid).await,
        Kind::Claim => delete_exact(&api::<PersistentVolumeClaim>(client, ns), name, uid).await,
        Kind::DataVolume => delete_exact(&api::<DataVolume>(client, ns), name, uid).await,
        Kind::Secret => delete_exact(&api::<Secret>(client, ns), name, uid).await,
        Kind::ConfigMap => delete_exact(&api::<ConfigMap>(client, ns), name, uid).await,
        Kind::Attachment => {
            delete_exact(&api::<NetworkAttachmentDefinition>(client, ns), name, uid).await
        }
    }
}

/// Deletes `name` if it is still the object with `uid` (never a namesake made since).
pub async fn delete_exact<K>(api: &Api<K>, name: &str, uid: String) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams::default().preconditions(Preconditions {
        uid: Some(uid),
        resource_version: None,
    });
    match api.delete(name, &dp).await {
        Err(e) if is_not_found(&e) || matches!(&e, kube::Error::Api(s) if s.code == 409) => Ok(()),
        Err(e) => Err(e.into()),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            serde_json::from_value(json!({"status": "Failure", "code": code,
                "message": message, "reason": "Invalid"}))
            .expect("status"),
        )
    }

    #[test]
    fn cdis_clone_refusal_is_told_apart_from_other_refusals() {
        let clone: DataVolume = serde_json::from_value(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
            "metadata": {"name": "m-root"},
            "spec": {"source": {"pvc": {"name": "golden", "namespace": "os"}}}
        }))
        .expect("dv");
        assert!(is_clone(&clone));
        let mut import = clone.clone();
        import.spec.source = None;
        assert!(!is_clone(&import));

        let cdi = "User system:serviceaccount:x:y has insufficient permissions in clone source \
                   namespace os";
        let problem = |clone, e| {
            let p = data_volume_write_problem("m-root".into(), clone, &e);
            (p.reason(), p.condition(), p.to_string())
        };
        assert_eq!(
            problem(true, refused(422, cdi)),
            (
                "CloneUnauthorized",
                "StorageReady",
                format!("DataVolume m-root: CDI refused the clone: {cdi}")
            )
        );
        assert_eq!(
            problem(true, refused(403, "forbidden")).0,
            "CloneUnauthorized"
        );
        let (reason, condition, message) = problem(true, refused(422, "spec.storage: Invalid"));
        assert_eq!((reason, condition), ("DataVolumeFailed", "StorageReady"));
        assert!(message.contains("spec.storage: Invalid"), "{message}");
        // An import is never a clone refusal, whatever the code.
        assert_eq!(
            problem(false, refused(403, "forbidden")).0,
            "DataVolumeFailed"
        );
    }
}
