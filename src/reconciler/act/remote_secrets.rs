//! The copies of a remote Machine's disk-source credentials (see
//! [`crate::reconciler::decide::remote_secrets`]): each source read on the management cluster
//! and each copy on the remote by name (Secrets and ConfigMaps are never watched), written
//! before the DataVolumes that name them (deleted by `act` as `decide` says, with the Machine
//! or a removed CD-ROM's DataVolume).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::{Resource, ResourceExt};

use super::apply::{self, Prover};
use super::failed;
use crate::api::{Machine, MachineSpec};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::decide::disks::conflict;
use crate::reconciler::decide::ownership::MachineRef;
use crate::reconciler::decide::problem::Problem;
use crate::reconciler::decide::remote_secrets::{self as decide, Credential, Step, Wanted};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::store::last_write::LastWrite;

/// Writes the copy of each credential a DataVolume of `dvs` names. Returns the problems, and the
/// DataVolumes that must not be written: those naming a copy not in place (someone else's of
/// that name, or one whose write failed), whose import would read the wrong credentials.
pub async fn ensure_all(
    ctx: &Context,
    cluster: &Cluster,
    (machine, spec): (&Machine, &MachineSpec),
    dvs: &[DataVolume],
    prover: &Prover<'_>,
) -> (Vec<Problem>, Vec<String>) {
    let (mut problems, mut held) = (Vec::new(), Vec::new());
    if cluster.is_local() {
        return (problems, held);
    }
    let name = machine.name_any();
    let wanted = decide::wanted(&name, &spec.disks, &spec.cdroms);
    let named = (wanted.iter()).filter(|w| dvs.iter().any(|dv| decide::names_copy(dv, w)));
    for w in named {
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

/// The two kinds copied, and how each is decided.
trait Copied:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + serde::Serialize
    + serde::de::DeserializeOwned
    + Clone
    + std::fmt::Debug
{
    fn decide(
        w: &Wanted,
        at: (MachineRef, &str),
        source: Option<&Self>,
        live: Option<&Self>,
        key: &crate::reconciler::decide::evidence::OwnershipKey,
    ) -> Step<Self>;
}

impl Copied for Secret {
    fn decide(
        w: &Wanted,
        at: (MachineRef, &str),
        source: Option<&Self>,
        live: Option<&Self>,
        key: &crate::reconciler::decide::evidence::OwnershipKey,
    ) -> Step<Self> {
        decide::secret_copy(w, at, source, live, key)
    }
}

impl Copied for ConfigMap {
    fn decide(
        w: &Wanted,
        at: (MachineRef, &str),
        source: Option<&Self>,
        live: Option<&Self>,
        key: &crate::reconciler::decide::evidence::OwnershipKey,
    ) -> Step<Self> {
        decide::config_map_copy(w, at, source, live, key)
    }
}

async fn copy<K: Copied>(
    ctx: &Context,
    cluster: &Cluster,
    machine: &Machine,
    w: &Wanted,
    prover: &Prover<'_>,
) -> Result<(), Problem> {
    let ns = machine.namespace().unwrap_or_default();
    let kind = w.what.kind();
    let sources: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let copies: Api<K> = Api::namespaced(cluster.client.clone(), &ns);
    let source =
        (sources.get_opt(&w.source).await).map_err(|e| failed(kind, w.copy.clone(), &e))?;
    let live = (copies.get_opt(&w.copy).await).map_err(|e| failed(kind, w.copy.clone(), &e))?;
    let at = (MachineRef::of(machine), ns.as_str());
    match K::decide(w, at, source.as_ref(), live.as_ref(), &cluster.key) {
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
