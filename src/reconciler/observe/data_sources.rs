//! A remote Machine's DataSources, read by name on its cluster while the DataVolume of their
//! volume is not made (`decide::remote_clones` says which and judges them). One GET each,
//! through the cluster's client; never cached or watched.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

use crate::access::data_sources;
use crate::api::{Machine, MachineSpec};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::decide::remote_clones::{Found, Seen, ready, to_read};
use crate::reconciler::run::cluster::Cluster;

/// `None` for a local Machine; else what its cluster holds of the DataSources its unmade
/// `dataSource` volumes name (none read where CDI is not served: nothing is cloned there).
pub async fn remote(
    cluster: &Cluster,
    machine: &Machine,
    spec: &MachineSpec,
    data_volumes: &BTreeMap<String, DataVolume>,
) -> Result<Option<Found>, kube::Error> {
    let Some(name) = cluster.name.clone() else {
        return Ok(None);
    };
    let mut found = Found {
        cluster: name,
        allow_cross_namespace_clones: cluster.allow_cross_namespace_clones,
        data_sources: BTreeMap::new(),
    };
    if !cluster.apis.cdi {
        return Ok(Some(found));
    }
    let ns = machine.namespace().unwrap_or_default();
    let refs = to_read(&ns, &machine.name_any(), spec, |dv| {
        data_volumes.contains_key(dv)
    });
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataSource"),
        "datasources",
    );
    for (namespace, name) in refs {
        let api: Api<DynamicObject> =
            Api::namespaced_with(cluster.client.clone(), &namespace, &resource);
        let json = match api.get_opt(&name).await {
            Ok(ds) => ds.and_then(|d| serde_json::to_value(d).ok()),
            // CDI's DataSource API not served there: no DataSource can exist.
            Err(kube::Error::Api(e)) if e.code == 404 => None,
            Err(e) => return Err(e),
        };
        let seen = Seen {
            target: data_sources::resolve(&namespace, json.as_ref()),
            ready: json.as_ref().is_some_and(ready),
        };
        found.data_sources.insert((namespace, name), seen);
    }
    Ok(Some(found))
}
