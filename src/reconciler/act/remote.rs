//! What only a Machine on a remote cluster needs: its namespace there.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::{MANAGED_BY, MANAGED_BY_LABEL};

/// Makes the Machine's namespace on a remote cluster if it is missing (labelled as ours; one
/// that exists is used as it is). Remembered once seen, so asked for once per cluster.
pub async fn ensure_namespace(cluster: &Cluster, ns: &str) -> Result<(), kube::Error> {
    let known = |c: &Cluster| {
        let set = c.namespaces.lock().unwrap_or_else(|p| p.into_inner());
        set.contains(ns)
    };
    if cluster.is_local() || known(cluster) {
        return Ok(());
    }
    let api: Api<Namespace> = Api::all(cluster.client.clone());
    if api.get_metadata_opt(ns).await?.is_none() {
        let labels = [(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())].into();
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.to_owned()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match api.create(&PostParams::default(), &namespace).await {
            Ok(_) => {
                tracing::info!(namespace = ns, cluster = ?cluster.name, "created the Machine's namespace on its cluster")
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    let mut set = cluster.namespaces.lock().unwrap_or_else(|p| p.into_inner());
    set.insert(ns.to_owned());
    Ok(())
}
