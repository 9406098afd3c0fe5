//! Where observe reads an object: our own newer write, the watch cache, or the API server; and
//! which credential copies a remote cluster holds (never cached: read by name, metadata only).

use std::fmt::Debug;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::reconciler::decide::problem::Kind;
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::store::last_write::LastWrite;
use crate::reconciler::store::packed::{Brief, Packed};
use crate::reconciler::store::presence::Presence;

/// Where [`lookup`] finds an object.
#[derive(Debug, PartialEq)]
pub(super) enum Found<K> {
    Here(K),
    /// Read it from the API server.
    AskApi,
    Absent,
}

/// Our own newer write, else the cached copy, else, when the names cache knows an object of that
/// name (someone else's, or ours without our labels) or is not filled yet, the API's. A cached
/// copy that does not decode is never taken as absent: the API's copy is read instead.
pub(super) fn find<K: Resource<DynamicType = ()> + DeserializeOwned + Brief>(
    ours: Option<K>,
    cached: Option<&Packed<K>>,
    named: bool,
    synced: bool,
) -> Found<K> {
    if let Some(k) = ours {
        return Found::Here(k);
    }
    if let Some(c) = cached {
        return match c.unpack() {
            Ok(k) => Found::Here(k),
            Err(e) => {
                tracing::warn!(object = %c.name_any(), error = %e, "cached copy does not decode; reading it from the API server");
                Found::AskApi
            }
        };
    }
    if named || !synced {
        Found::AskApi
    } else {
        Found::Absent
    }
}

/// The object `name` in `ns`, as [`find`] says where to read it.
pub(super) async fn lookup<K>(
    cluster: &Cluster,
    (store, names, written): (&Store<Packed<K>>, &Presence, &LastWrite<K>),
    api: &Api<K>,
    ns: &str,
    name: &str,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Brief,
{
    let cached = store.get(&ObjectRef::new(name).within(ns));
    let cached_version = cached.as_ref().and_then(|c| c.resource_version());
    let ours = written.newer_than(&format!("{ns}/{name}"), cached_version.as_deref());
    let named = names.contains(ns, name);
    match find(
        ours,
        cached.as_deref(),
        named,
        cluster.state.caches_synced(),
    ) {
        Found::Here(k) => Ok(Some(k)),
        Found::AskApi => api.get_opt(name).await,
        Found::Absent => Ok(None),
    }
}

/// Which of the credential copies named `names` are on the cluster of `client` (metadata only):
/// what a deleting remote Machine, or a removed CD-ROM's DataVolume, leaves there.
pub(super) async fn copies_found(
    client: &kube::Client,
    ns: &str,
    names: Vec<(Kind, String)>,
) -> Result<Vec<(Kind, ObjectMeta)>, kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut found = Vec::new();
    for (kind, copy) in names {
        let meta = match kind {
            Kind::ConfigMap => config_maps
                .get_metadata_opt(&copy)
                .await?
                .map(|m| m.metadata),
            _ => secrets.get_metadata_opt(&copy).await?.map(|m| m.metadata),
        };
        found.extend(meta.map(|meta| (kind, meta)));
    }
    Ok(found)
}
