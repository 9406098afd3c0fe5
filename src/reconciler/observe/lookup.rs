//! Where observe reads an object: our own newer write, the watch cache, or the API server.

use std::fmt::Debug;

use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

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
