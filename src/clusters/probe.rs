//! Talking to a remote cluster (I/O): a client from a checked kubeconfig, and the probe that
//! asks whether its API server answers, accepts the credentials and serves the optional APIs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::Settings;
use super::decide::identity::IDENTITY_NAMESPACE;
use super::decide::{Probe, classify};
use super::kubeconfig::{Unusable, redact};
use super::registry::Apis;
use crate::client::limited_client;
use crate::discovery::{self, Found};

/// The APIs the reconciler makes objects of, when served: (group/version, plural).
const KUBEVIRT: (&str, &str) = ("kubevirt.io/v1", "virtualmachines");
const CDI: (&str, &str) = ("cdi.kubevirt.io/v1beta1", "datavolumes");
const STORAGE_PROFILES: (&str, &str) = ("cdi.kubevirt.io/v1beta1", "storageprofiles");
const MULTUS: (&str, &str) = ("k8s.cni.cncf.io/v1", "network-attachment-definitions");
const KUBEVIRT_SNAPSHOTS: (&str, &str) = ("snapshot.kubevirt.io/v1beta1", "virtualmachinerestores");
const KUBEVIRT_INSTALLS: (&str, &str) = ("kubevirt.io/v1", "kubevirts");

/// A client of the cluster `kubeconfig` describes (its current context), with the settings'
/// connect timeout, read timeout and rate limit, and the server's URL (for messages).
pub async fn connect(
    kubeconfig: Kubeconfig,
    settings: &Settings,
) -> Result<(Client, String), Unusable> {
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Unusable::Invalid(redact(&e.to_string())))?;
    config.connect_timeout = Some(settings.connect_timeout);
    let server = config.cluster_url.to_string();
    let client = limited_client(config, settings.qps, settings.burst, settings.read_timeout)
        .map_err(|e| Unusable::Invalid(redact(&format!("{e:#}"))))?;
    Ok((client, server.trim_end_matches('/').to_owned()))
}

/// Asks the API server its version, reads the kube-system namespace (the credentials, the
/// cluster's identity: its uid), and which optional APIs it serves; all within `limit`. The
/// first failure decides.
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
    let identity = Api::<Namespace>::all(client.clone())
        .get_metadata(IDENTITY_NAMESPACE)
        .await
        .map_err(|e| classify(&e))?
        .metadata
        .uid
        .ok_or_else(|| Probe::Unreachable(format!("namespace {IDENTITY_NAMESPACE} has no uid")))?;
    let cdi = served(client, CDI).await?;
    let kubevirt = served(client, KUBEVIRT).await?;
    let apis = Apis {
        kubevirt,
        kubevirt_snapshots: kubevirt && served(client, KUBEVIRT_SNAPSHOTS).await?,
        kubevirt_installs: kubevirt
            && served(client, KUBEVIRT_INSTALLS).await?
            && discovery::may_list(client, KUBEVIRT_INSTALLS.0, KUBEVIRT_INSTALLS.1).await,
        cdi,
        storage_profiles: cdi && served(client, STORAGE_PROFILES).await?,
        multus: served(client, MULTUS).await?,
    };
    Ok(Probe::Reached {
        version,
        apis,
        identity,
    })
}

/// One discovery question, classified as [`discovery::classify`] does; an answer not worth
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn kubeconfig(server: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!(
            "clusters: [{{name: c, cluster: {{server: '{server}'}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"
        ))
        .expect("kubeconfig")
    }

    #[test]
    fn connecting_is_quick_and_a_probe_is_bounded() {
        let s = Settings::new(Duration::from_secs(30));
        assert_eq!(s.connect_timeout, Duration::from_secs(5));
        assert_eq!(s.probe_timeout(), Duration::from_secs(10));
    }

    /// An API server that accepts connections and never answers: the probe ends at its limit,
    /// Unreachable, naming the server.
    #[tokio::test]
    async fn a_silent_server_is_unreachable_at_the_limit() {
        crate::tls::install_crypto_provider();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let settings = Settings::new(Duration::from_secs(1));
        let (client, server) = connect(kubeconfig(&format!("http://{addr}")), &settings)
            .await
            .expect("client");
        assert_eq!(server, format!("http://{addr}"));
        let t0 = Instant::now();
        let found = probe(&client, &server, Duration::from_millis(300)).await;
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        match found {
            Probe::Unreachable(m) => {
                assert!(
                    m.contains(&server) && m.contains("no answer within 300ms"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        hold.abort();
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable_and_a_contextless_kubeconfig_invalid() {
        crate::tls::install_crypto_provider();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let settings = Settings::new(Duration::from_secs(1));
        let (client, server) = connect(kubeconfig(&format!("http://{closed}")), &settings)
            .await
            .expect("client");
        match probe(&client, &server, Duration::from_secs(5)).await {
            Probe::Unreachable(m) => assert!(m.starts_with(&server), "{m}"),
            other => panic!("{other:?}"),
        }
        let contextless = Kubeconfig::from_yaml("clusters: []").expect("parses");
        match connect(contextless, &settings).await {
            Err(Unusable::Invalid(m)) => assert!(m.contains("current context"), "{m}"),
            other => panic!("{:?}", other.map(|(_, s)| s)),
        }
    }
}
