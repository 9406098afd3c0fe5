//! What exists that was made under an ownership key (I/O), asked only when the key Secret is
//! missing: objects carrying our labels and a made-for or released-for proof, on this cluster
//! (in the watch scopes) and on each KubevirtConfig's cluster. Read by metadata, a page at a
//! time, stopping at the first one found. A KubevirtConfig's cluster that cannot be read counts
//! only if a Machine's status says it was placed there.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ListParams};
use kube::{Client, Resource, ResourceExt};

use super::watches::Scope;
use crate::api::names::{MANAGED_BY, MANAGED_BY_LABEL, PROOF_ANNOTATION, RELEASE_ANNOTATION};
use crate::api::{KubevirtConfig, Machine};
use crate::clusters::{Health, Registry};
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::decide::key_start::Evidence;

/// How long a KubevirtConfig listed but not probed yet is waited for.
const PROBE_WAIT: Duration = Duration::from_secs(30);
const PAGE: u32 = 200;

/// What each place holds, by place (`this cluster`, `cluster <name>`).
pub async fn gather(
    client: &Client,
    scopes: &[Scope],
    registry: &Registry,
) -> Vec<(String, Evidence)> {
    let mut out = Vec::new();
    let mut here = Evidence::None;
    for scope in scopes {
        let ns = match scope {
            Scope::All => None,
            Scope::Namespace(ns) => Some(ns.as_str()),
        };
        here = first_of(client, ns).await;
        if here != Evidence::None {
            break;
        }
    }
    out.push(("this cluster".to_owned(), here));
    let configs = match Api::<KubevirtConfig>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
    {
        Ok(list) => list.items.iter().map(|c| c.name_any()).collect(),
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => {
            let why = format!("listing KubevirtConfigs: {e}");
            out.push(("the KubevirtConfigs".to_owned(), Evidence::Unknown(why)));
            Vec::new()
        }
    };
    let placed = placed_on(client, scopes).await;
    for name in configs {
        let evidence = match probed(registry, &name).await {
            Some(Health::Ready(c)) => first_of(&c.client, None).await,
            // A cluster that cannot be read holds nothing of ours when no Machine was ever
            // placed there (a first install with a kubeconfig still to fix).
            _ if placed.as_ref().is_ok_and(|p| !p.contains(&name)) => Evidence::None,
            Some(Health::NotReady {
                reason, message, ..
            }) => Evidence::Unknown(format!("{reason}: {message}")),
            None => Evidence::Unknown("not probed yet".to_owned()),
        };
        out.push((format!("cluster {name}"), evidence));
    }
    out
}

/// The clusters Machines' statuses say they were placed on (reconciled there at least once).
async fn placed_on(client: &Client, scopes: &[Scope]) -> Result<BTreeSet<String>, kube::Error> {
    let mut placed = BTreeSet::new();
    for scope in scopes {
        let api: Api<Machine> = match scope {
            Scope::All => Api::all(client.clone()),
            Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
        };
        let list = api.list(&ListParams::default()).await?;
        placed.extend(list.items.into_iter().filter_map(|m| m.status?.cluster));
    }
    Ok(placed)
}

/// The health of KubevirtConfig `name` once probed (bounded wait).
async fn probed(registry: &Registry, name: &str) -> Option<Health> {
    let mut changes = registry.subscribe();
    let wait = changes.wait_for(|map| map.contains_key(name));
    let _ = tokio::time::timeout(PROBE_WAIT, wait).await;
    registry.get(name)
}

/// The first VM or claim there (in `ns`, or everywhere) carrying a proof.
async fn first_of(client: &Client, ns: Option<&str>) -> Evidence {
    match first::<VirtualMachine>(client, ns).await {
        Evidence::None => first::<PersistentVolumeClaim>(client, ns).await,
        other => other,
    }
}

async fn first<K>(client: &Client, ns: Option<&str>) -> Evidence
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    let mut params = ListParams::default().labels(&selector).limit(PAGE);
    loop {
        let page = match api.list_metadata(&params).await {
            Ok(page) => page,
            // The API is not served there: nothing of that kind.
            Err(kube::Error::Api(e)) if e.code == 404 => return Evidence::None,
            Err(e) => return Evidence::Unknown(format!("listing {}: {e}", K::plural(&()))),
        };
        let proven = page.items.iter().find(|o| {
            let a = o.annotations();
            a.contains_key(PROOF_ANNOTATION) || a.contains_key(RELEASE_ANNOTATION)
        });
        if let Some(o) = proven {
            let (ns, name) = (o.namespace().unwrap_or_default(), o.name_any());
            return Evidence::Found(format!("{} {ns}/{name}", K::kind(&())));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Evidence::None,
        }
    }
}
