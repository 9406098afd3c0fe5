//! Talking to a remote cluster (I/O): a client from a checked kubeconfig, and the probe that
//! asks whether its API server answers, accepts the credentials and serves the optional APIs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::Settings;
use super::decide::{Probe, classify};
use super::kubeconfig::Unusable;
use super::registry::Apis;
use crate::client::limited_client;
use crate::reconciler::run::discovery::{self, Found};

/// The APIs the reconciler makes objects of, when served: (group/version, plural).
const KUBEVIRT: (&str, &str) = ("kubevirt.io/v1", "virtualmachines");
const CDI: (&str, &str) = ("cdi.kubevirt.io/v1beta1", "datavolumes");
const MULTUS: (&str, &str) = ("k8s.cni.cncf.io/v1", "network-attachment-definitions");

/// A client of the cluster `kubeconfig` describes (its current context), with the settings'
/// connect timeout, read timeout and rate limit, and the server's URL (for messages).
pub async fn connect(
    kubeconfig: Kubeconfig,
    settings: &Settings,
) -> Result<(Client, String), Unusable> {
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Unusable::Invalid(e.to_string()))?;
    config.connect_timeout = Some(settings.connect_timeout);
    let server = config.cluster_url.to_string();
    let client = limited_client(config, settings.qps, settings.burst, settings.read_timeout)
        .map_err(|e| Unusable::Invalid(format!("{e:#}")))?;
    Ok((client, server.trim_end_matches('/').to_owned()))
}

/// Asks the API server its version, lists one namespace (the credentials and at least some of
/// manifests/remote-cluster-rbac.yaml's rights), and which optional APIs it serves; all within
/// `limit`. The first failure decides.
pub async fn probe(client: &Client, server: &str, limit: Duration) -> Probe {
    match tokio::time::timeout(limit, ask(client)).await {
        Ok(Ok(probe)) => probe,
        Ok(Err(Probe::Unreachable(e))) => Probe::Unreachable(format!("{server}: {e}")),
        Ok(Err(other)) => other,
        Err(_) => Probe::Unreachable(format!("{server}: no answer within {limit:?}")),
    }
}

async fn ask(client: &Client) -> Result<Probe, Probe> {
    let version = client
        .apiserver_version()
        .await
        .map_err(|e| classify(&e))?
        .git_version;
    Api::<Namespace>::all(client.clone())
        .list_metadata(&ListParams::default().limit(1))
        .await
        .map_err(|e| classify(&e))?;
    let apis = Apis {
        kubevirt: served(client, KUBEVIRT).await?,
        cdi: served(client, CDI).await?,
        multus: served(client, MULTUS).await?,
    };
    Ok(Probe::Reached { version, apis })
}

/// One discovery question, classified as the reconciler's discovery does; an answer not worth
/// believing fails the probe (it is asked again at the next one).
async fn served(client: &Client, (group_version, plural): (&str, &str)) -> Result<bool, Probe> {
    let answer = client.list_api_group_resources(group_version).await;
    let listed = answer
        .as_ref()
        .map(|list| list.resources.iter().any(|r| r.name == plural));
    match discovery::classify(listed) {
        Found::Served => Ok(true),
        Found::Absent => Ok(false),
        Found::Retry => Err(match answer {
            Err(e) => classify(&e),
            Ok(_) => Probe::Unreachable(format!("discovery of {group_version} failed")),
        }),
    }
}
