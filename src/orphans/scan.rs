//! The listing (I/O): reads the ownership key and the live Machines on the local cluster, then
//! each cluster's VMs, claims and DataVolumes (metadata only, in pages), and judges each with
//! [`super::decide::judge`]. A kind a cluster does not serve has nothing to list.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{Api, ApiResource, ListParams};
use kube::{Client, Resource, ResourceExt};

use super::decide::{LiveMachines, Verdict, judge};
use crate::api::{KubevirtConfig, Machine};
use crate::clusters::{self, kubeconfig};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::run::ownership_key;

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

/// One object that claims to be ours and is not a live Machine's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub cluster: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub verdict: Verdict,
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

/// Every Machine on the local cluster (being deleted or not: its objects are still its own).
pub async fn live_machines(client: &Client) -> Result<LiveMachines, ScanError> {
    let api: Api<Machine> = Api::all(client.clone());
    let list = api
        .list_metadata(&ListParams::default())
        .await
        .map_err(listing("machines", LOCAL))?;
    Ok(list
        .items
        .iter()
        .filter_map(|m| {
            let ns = m.namespace()?;
            Some(((ns, m.name_any()), m.uid()?))
        })
        .collect())
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

/// Lists `K`'s metadata on `target` and judges each object; nothing when `K` is not served.
async fn scan_kind<K>(target: &Target, live: &LiveMachines) -> Result<Vec<Found>, ScanError>
where
    K: Resource<DynamicType = ()>,
{
    let kind = K::kind(&()).into_owned();
    let api: Api<kube::api::DynamicObject> =
        Api::all_with(target.client.clone(), &ApiResource::erase::<K>(&()));
    let mut params = ListParams::default().limit(PAGE);
    let mut found = Vec::new();
    loop {
        let page = match api.list_metadata(&params).await {
            Ok(page) => page,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(found),
            Err(e) => return Err(listing(&K::plural(&()), &target.name)(e)),
        };
        for o in &page.items {
            let verdict = judge(&kind, &o.metadata, live, &target.key);
            if matches!(verdict, Verdict::Orphan { .. } | Verdict::Unproven) {
                found.push(Found {
                    cluster: target.name.clone(),
                    kind: kind.clone(),
                    namespace: o.namespace().unwrap_or_default(),
                    name: o.name_any(),
                    verdict,
                });
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(found),
        }
    }
}

/// The leftovers and unproven objects of every kind on `target`.
pub async fn scan(target: &Target, live: &LiveMachines) -> Result<Vec<Found>, ScanError> {
    let mut found = scan_kind::<VirtualMachine>(target, live).await?;
    found.extend(scan_kind::<PersistentVolumeClaim>(target, live).await?);
    found.extend(scan_kind::<DataVolume>(target, live).await?);
    Ok(found)
}
