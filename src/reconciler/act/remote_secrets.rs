//! The copies of a remote Machine's disk-source credentials (see
//! [`crate::reconciler::decide::remote_secrets`]): each source read on the management cluster
//! and each copy on the remote by name (Secrets and ConfigMaps are never watched), written
//! before the DataVolumes that name them (deleted by `act` as `decide` says, with the Machine
//! or a removed CD-ROM's DataVolume).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::ResourceExt;

use super::apply::{self, Prover};
use super::failed;
use crate::api::Machine;
use crate::reconciler::decide::disks::conflict;
use crate::reconciler::decide::ownership::MachineRef;
use crate::reconciler::decide::problem::Problem;
use crate::reconciler::decide::remote_secrets::{self as decide, Copied, Credential, Step, Wanted};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::store::last_write::LastWrite;

/// Writes each of the `copies` decided. Returns the problems, and the DataVolumes that must
/// not be written: those naming a copy not in place (someone else's of that name, or one whose
/// write failed), whose import would read the wrong credentials.
pub async fn ensure_all(
    ctx: &Context,
    cluster: &Cluster,
    machine: &Machine,
    copies: &[Wanted],
    prover: &Prover<'_>,
) -> (Vec<Problem>, Vec<String>) {
    let (mut problems, mut held) = (Vec::new(), Vec::new());
    for w in copies {
        let result = match w.what {
            Credential::Secret => copy::<Secret>(ctx, cluster, machine, w, prover).await,
            Credential::ConfigMap => copy::<ConfigMap>(ctx, cluster, machine, w, prover).await,
        };
        if let Err(p) = result {
            problems.push(p);
            held.push(w.data_volume.clone());
        }
    }
    (problems, held)
}

async fn copy<K>(
    ctx: &Context,
    cluster: &Cluster,
    machine: &Machine,
    w: &Wanted,
    prover: &Prover<'_>,
) -> Result<(), Problem>
where
    K: Copied<Scope = k8s_openapi::NamespaceResourceScope>,
    K: serde::Serialize + serde::de::DeserializeOwned + Clone + std::fmt::Debug,
{
    let ns = machine.namespace().unwrap_or_default();
    let kind = w.what.kind();
    let sources: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let copies: Api<K> = Api::namespaced(cluster.client.clone(), &ns);
    let source =
        (sources.get_opt(&w.source).await).map_err(|e| failed(kind, w.copy.clone(), &e))?;
    let live = (copies.get_opt(&w.copy).await).map_err(|e| failed(kind, w.copy.clone(), &e))?;
    let at = (MachineRef::of(machine), ns.as_str());
    match decide::copy_step(w, at, source.as_ref(), live.as_ref(), &cluster.key) {
        Step::Write(desired) => {
            // Read just now: nothing stands in for the cache here.
            let written = LastWrite::default();
            apply::ensure_proven(&copies, desired, live, &written, prover)
                .await
                .map(drop)
                .map_err(|e| failed(kind, w.copy.clone(), &e))
        }
        Step::Conflict => Err(conflict(kind, w.copy.clone())),
        Step::SourceMissing => {
            // CDI waits for the copy; the author was asked `get` on it at admission.
            tracing::warn!(source = %w.source, kind = kind.as_str(), "a disk source's credential is missing on the management cluster: not copied");
            Ok(())
        }
    }
}
