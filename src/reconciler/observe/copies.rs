//! A remote Machine's credential copies as observe reads them (see `decide::remote_secrets`):
//! each source in the Machine's namespace on the management cluster, and the object of each
//! copy's name on the remote cluster, by name and whole (Secrets and ConfigMaps are never
//! watched). `decide` makes the copies of the sources and writes only over its own.

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::reconciler::decide::remote_secrets::{Credential, Found, Wanted};

/// Reads the source and the copy of each of `wanted`: `management` is a client of the
/// management cluster, `remote` of the Machine's, both in namespace `ns`.
pub(super) async fn read(
    (management, remote): (&Client, &Client),
    ns: &str,
    wanted: Vec<Wanted>,
) -> Result<Vec<(Wanted, Found)>, kube::Error> {
    let mut out = Vec::new();
    for w in wanted {
        let found = match w.what {
            Credential::Secret => {
                let (source, live) = pair::<Secret>((management, remote), ns, &w).await?;
                Found::Secret { source, live }
            }
            Credential::ConfigMap => {
                let (source, live) = pair::<ConfigMap>((management, remote), ns, &w).await?;
                Found::ConfigMap { source, live }
            }
        };
        out.push((w, found));
    }
    Ok(out)
}

async fn pair<K>(
    (management, remote): (&Client, &Client),
    ns: &str,
    w: &Wanted,
) -> Result<(Option<K>, Option<K>), kube::Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    K: DeserializeOwned + Clone + std::fmt::Debug,
{
    let source = Api::<K>::namespaced(management.clone(), ns)
        .get_opt(&w.source)
        .await?;
    if source.is_none() {
        // CDI waits for the copy; the author was asked `get` on it at admission.
        let kind = w.what.kind();
        tracing::warn!(source = %w.source, kind = kind.as_str(), "a disk source's credential is missing on the management cluster: not copied");
    }
    let live = Api::<K>::namespaced(remote.clone(), ns)
        .get_opt(&w.copy)
        .await?;
    Ok((source, live))
}
