//! The listing (I/O): reads the ownership key, each cluster's VMs, claims and DataVolumes
//! (metadata only, in pages, within the watch scopes) keeping those that claim to be ours, then
//! the live Machines on the local cluster; [`super::decide`] judges them. A kind a cluster does
//! not serve has nothing to list. Shared by `check --orphans` and the leader's gauges.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, Resource, ResourceExt};

use super::decide::{Listed, LiveMachines, claims};
use crate::api::{KubevirtConfig, Machine};
use crate::clusters::{self, kubeconfig};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::run::ownership_key;
use crate::reconciler::run::watches::Scope;

pub use super::decide::Found;

/// The name the local cluster is listed under.
pub const LOCAL: &str = "local";
const PAGE: u32 = 500;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("reading the ownership key in namespace {namespace}: {message}")]
    Key { namespace: String, message: String },
    #[error(
        "no ownership key Secret in namespace {0}: nothing can be proven ours (is the operator \
         installed there? --namespace)"
    )]
    NoKey(String),
    #[error("listing {what} on cluster {cluster}: {source}")]
    List {
        what: String,
        cluster: String,
        source: kube::Error,
    },
}

/// A cluster to look at: the local one, or a KubevirtConfig's.
pub struct Target {
    pub name: String,
    pub client: Client,
    pub key: OwnershipKey,
}

/// The key, read from `namespace` (the operator's).
pub async fn key(client: &Client, namespace: &str) -> Result<OwnershipKey, ScanError> {
    match ownership_key::read(client, namespace).await {
        Ok(Some(key)) => Ok(key),
        Ok(None) => Err(ScanError::NoKey(namespace.to_owned())),
        Err(e) => Err(ScanError::Key {
            namespace: namespace.to_owned(),
            message: e.to_string(),
        }),
    }
}

fn listing(what: &str, cluster: &str) -> impl FnOnce(kube::Error) -> ScanError {
    let (what, cluster) = (what.to_owned(), cluster.to_owned());
    move |source| ScanError::List {
        what,
        cluster,
        source,
    }
}

/// `K` in `scope` on `client`.
fn api<K: Resource<DynamicType = ()>>(client: &Client, scope: &Scope) -> Api<DynamicObject> {
    let ar = ApiResource::erase::<K>(&());
    match scope {
        Scope::All => Api::all_with(client.clone(), &ar),
        Scope::Namespace(ns) => Api::namespaced_with(client.clone(), ns, &ar),
    }
}

/// Every `K`'s metadata in `scopes` on `cluster`, page by page, passed to `keep`; `Ok(false)`
/// when the kind is not served there.
async fn list<K: Resource<DynamicType = ()>>(
    client: &Client,
    cluster: &str,
    scopes: &[Scope],
    mut keep: impl FnMut(kube::api::PartialObjectMeta<DynamicObject>),
) -> Result<bool, ScanError> {
    for scope in scopes {
        let api = api::<K>(client, scope);
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = match api.list_metadata(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
                Err(e) => return Err(listing(&K::plural(&()), cluster)(e)),
            };
            page.items.into_iter().for_each(&mut keep);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(true)
}

/// Every Machine on the local cluster in `scopes` (being deleted or not: its objects are still
/// its own). Read after the objects are listed.
pub async fn live_machines(client: &Client, scopes: &[Scope]) -> Result<LiveMachines, ScanError> {
    let mut live = LiveMachines::new();
    list::<Machine>(client, LOCAL, scopes, |m| {
        if let (Some(ns), Some(uid)) = (m.namespace(), m.uid()) {
            live.insert((ns, m.name_any()), uid);
        }
    })
    .await?;
    Ok(live)
}

/// The local cluster and every KubevirtConfig's that can be reached; the others with why not.
pub async fn targets(
    local: &Client,
    key: &OwnershipKey,
) -> Result<(Vec<Target>, Vec<(String, String)>), ScanError> {
    let mut targets = vec![Target {
        name: LOCAL.to_owned(),
        client: local.clone(),
        key: key.clone(),
    }];
    let mut unreachable = Vec::new();
    let configs = Api::<KubevirtConfig>::all(local.clone())
        .list(&ListParams::default())
        .await;
    let configs = match configs {
        Ok(list) => list.items,
        // No KubevirtConfig CRD: no remote cluster.
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => return Err(listing("kubevirtconfigs", LOCAL)(e)),
    };
    let settings = clusters::Settings::new(clusters::DEFAULT_PROBE_INTERVAL);
    for config in configs {
        let name = config.name_any();
        let secrets: Api<Secret> = Api::namespaced(local.clone(), &config.spec.secret_namespace);
        let client = match secrets.get_opt(&config.spec.kubeconfig_secret_ref).await {
            Ok(Some(secret)) => match kubeconfig::read(secret.data.as_ref()) {
                Ok((kc, _)) => clusters::probe::connect(kc, &settings)
                    .await
                    .map(|(c, _)| c)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            Ok(None) => Err(format!(
                "no Secret {}/{}",
                config.spec.secret_namespace, config.spec.kubeconfig_secret_ref
            )),
            Err(e) => Err(format!("reading its kubeconfig Secret: {e}")),
        };
        match client {
            Ok(client) => targets.push(Target {
                name,
                client,
                key: key.without_history(),
            }),
            Err(why) => unreachable.push((name, why)),
        }
    }
    Ok((targets, unreachable))
}

/// `K`'s objects in `scopes` on `target` that claim to be ours, added to `out`.
async fn claiming_kind<K: Resource<DynamicType = ()>>(
    target: &Target,
    scopes: &[Scope],
    out: &mut Vec<Listed>,
) -> Result<(), ScanError> {
    let kind = K::kind(&()).into_owned();
    list::<K>(&target.client, &target.name, scopes, |o| {
        if claims(&o.metadata) {
            let mut meta = o.metadata;
            meta.managed_fields = None;
            out.push(Listed {
                kind: kind.clone(),
                meta,
            });
        }
    })
    .await?;
    Ok(())
}

/// The VMs, claims and DataVolumes in `scopes` on `target` that claim to be ours.
pub async fn claiming(target: &Target, scopes: &[Scope]) -> Result<Vec<Listed>, ScanError> {
    let mut out = Vec::new();
    claiming_kind::<VirtualMachine>(target, scopes, &mut out).await?;
    claiming_kind::<PersistentVolumeClaim>(target, scopes, &mut out).await?;
    claiming_kind::<DataVolume>(target, scopes, &mut out).await?;
    Ok(out)
}
