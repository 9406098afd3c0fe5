//! What only a Machine on a remote cluster needs: its namespace there, used only if the operator
//! made it (see [`crate::reconciler::decide::remote_namespace`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};

use crate::api::names::PROOF_ANNOTATION;
use crate::reconciler::decide::remote_namespace::{self as decide, Verdict, Wanted};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::remotes::Unready;
use crate::reconciler::store::packed::{Brief, Packed};

/// How long a namespace found ours is not asked for again: one deleted and made again by someone
/// else is found within this time.
const RECHECK: Duration = Duration::from_secs(60);

/// Why the Machine's namespace `ns` on a remote cluster cannot be used, or `None` once it is
/// ours (made now, proven, or adopted by the earlier rule). Remembered once ours, so asked for
/// once a minute per cluster; nothing is written into a namespace found otherwise.
pub async fn namespace(cluster: &Cluster, ns: &str) -> Result<Option<Unready>, kube::Error> {
    let known = |c: &Cluster| {
        let seen = c.namespaces.lock().unwrap_or_else(|p| p.into_inner());
        seen.get(ns).is_some_and(|at| at.elapsed() < RECHECK)
    };
    let (Some(name), Some(identity)) = (cluster.name.as_deref(), cluster.identity.as_deref())
    else {
        return Ok(None);
    };
    if known(cluster) {
        return Ok(None);
    }
    let w = Wanted {
        name: ns,
        management: ns,
        cluster: name,
        identity,
    };
    let api: Api<Namespace> = Api::all(cluster.client.clone());
    // Twice at most: one made by someone else between our read and our create is judged again.
    for _ in 0..2 {
        let found = api.get_metadata_opt(ns).await?.map(|n| n.metadata);
        let holds = found
            .as_ref()
            .is_some_and(|m| !decide::proven(&w, m, &cluster.key) && holds_ours(cluster, ns));
        match decide::judge(&w, found.as_ref(), holds, &cluster.key) {
            Verdict::Use => {}
            Verdict::Make(namespace) => {
                match api.create(&PostParams::default(), &namespace).await {
                    Ok(_) => {
                        tracing::info!(
                            namespace = ns,
                            cluster = name,
                            "made the Machine's namespace on its cluster"
                        )
                    }
                    Err(kube::Error::Api(e)) if e.code == 409 => continue,
                    Err(e) => return Err(e),
                }
            }
            Verdict::Adopt(proof) => {
                let patch =
                    serde_json::json!({"metadata": {"annotations": {PROOF_ANNOTATION: proof}}});
                api.patch(ns, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
                tracing::info!(
                    namespace = ns,
                    cluster = name,
                    "proved the Machine's namespace on its cluster, made before namespaces carried proofs"
                );
            }
            Verdict::Unready(reason, message) => {
                let reason = reason.to_owned();
                return Ok(Some(Unready { reason, message }));
            }
        }
        let mut seen = cluster.namespaces.lock().unwrap_or_else(|p| p.into_inner());
        seen.insert(ns.to_owned(), Instant::now());
        return Ok(None);
    }
    Ok(Some(Unready {
        reason: decide::NAMESPACE_CONFLICT.to_owned(),
        message: format!("namespace {ns} on cluster {name} changed while it was being made"),
    }))
}

/// Whether the cached VMs and claims of `ns` hold one proven for its Machine.
fn holds_ours(cluster: &Cluster, ns: &str) -> bool {
    fn metas<K>(store: &Store<Packed<K>>, ns: &str) -> Vec<ObjectMeta>
    where
        K: Resource<DynamicType = ()> + Brief + serde::de::DeserializeOwned,
    {
        (store.state().iter())
            .filter(|o| o.namespace().as_deref() == Some(ns))
            .filter_map(|o| o.unpack().ok())
            .map(|o| o.meta().clone())
            .collect()
    }
    let vms = metas(&cluster.stores.vms, ns);
    let claims = metas(&cluster.stores.pvcs, ns);
    let found = (vms.iter().map(|m| ("VirtualMachine", m)))
        .chain(claims.iter().map(|m| ("PersistentVolumeClaim", m)));
    decide::holds_ours(found, &cluster.key)
}
