//! Writes a remote Machine's credential copies as `decide::remote_secrets` decided them, before
//! the DataVolumes that read them (deleted by `act` as `decide` says, with the Machine or a
//! removed CD-ROM's DataVolume).

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Resource;
use kube::api::Api;

use super::apply::{self, Prover};
use super::failed;
use crate::reconciler::decide::problem::Problem;
use crate::reconciler::decide::remote_secrets::{Wanted, Write};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::store::last_write::LastWrite;

/// Writes each copy of `writes` in namespace `ns`. Returns the problems, and the DataVolumes
/// that must not be written: those naming a copy whose write failed, whose import would read
/// the wrong credentials.
pub async fn write_all(
    cluster: &Cluster,
    ns: &str,
    writes: Vec<(Wanted, Write)>,
    prover: &Prover<'_>,
) -> (Vec<Problem>, Vec<String>) {
    let (mut problems, mut held) = (Vec::new(), Vec::new());
    for (w, write) in writes {
        let result = match write {
            Write::Secret { copy, live } => {
                write_one::<Secret>(cluster, ns, copy, live, prover).await
            }
            Write::ConfigMap { copy, live } => {
                write_one::<ConfigMap>(cluster, ns, copy, live, prover).await
            }
        };
        if let Err(e) = result {
            problems.push(failed(w.what.kind(), w.copy.clone(), &e));
            held.push(w.data_volume);
        }
    }
    (problems, held)
}

async fn write_one<K>(
    cluster: &Cluster,
    ns: &str,
    copy: K,
    live: Option<K>,
    prover: &Prover<'_>,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    K: serde::Serialize + serde::de::DeserializeOwned + Clone + std::fmt::Debug,
{
    let copies: Api<K> = Api::namespaced(cluster.client.clone(), ns);
    // Read by observe, just now: nothing stands in for a cache here.
    let written = LastWrite::default();
    apply::ensure_proven(&copies, copy, live, &written, prover)
        .await
        .map(drop)
}
