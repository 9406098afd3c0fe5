//! Reading `kube-system/extension-apiserver-authentication` into the verifier, at start and
//! then every [`REFRESH`] (kube-apiserver rewrites it when its front-proxy CA rotates).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use super::front_proxy::{self, CONFIG_MAP};
use super::verifier::FrontProxyVerifier;

pub const REFRESH: Duration = Duration::from_secs(60);
/// Until first read, retried sooner: the API is unavailable meanwhile.
const RETRY: Duration = Duration::from_secs(5);

/// Reads the ConfigMap once into `verifier`; the error names what is wrong.
pub async fn read_once(client: &Client, verifier: &FrontProxyVerifier) -> anyhow::Result<()> {
    let (namespace, name) = CONFIG_MAP;
    let map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(|e| anyhow::anyhow!("reading {namespace}/{name}: {e}"))?;
    let proxy = front_proxy::parse(&map.data.unwrap_or_default())?;
    verifier.trust(proxy)?;
    Ok(())
}

/// Keeps `verifier` current until the task is aborted. A failed read keeps what was trusted
/// (a passing API outage must not cut kube-apiserver off), and is logged.
pub async fn follow(client: Client, verifier: Arc<FrontProxyVerifier>) {
    let mut read = false;
    loop {
        match read_once(&client, &verifier).await {
            Ok(()) => {
                if !read {
                    tracing::info!("aggregated API: trusting the front proxy of kube-apiserver");
                }
                read = true;
            }
            Err(e) if read => tracing::warn!(
                error = %format!("{e:#}"),
                "aggregated API: cannot read the front proxy's CA again; trusting the one last read"
            ),
            Err(e) => tracing::warn!(
                error = %format!("{e:#}"),
                "aggregated API: cannot read the front proxy's CA; kube-apiserver is refused until it can be read"
            ),
        }
        tokio::time::sleep(if read { REFRESH } else { RETRY }).await;
    }
}
