//! The aggregation layer of a test control plane: kube-apiserver always runs with front-proxy
//! certificates (`apiserver.rs`), and here an APIService is registered for a server on
//! loopback.
//!
//! Routing: an APIService names a Service. kube-apiserver 1.20 dials, without
//! `--enable-aggregator-routing`, the Service's cluster IP, or for an `ExternalName` Service its
//! external name; with aggregator routing it dials an Endpoints address instead, but Endpoints
//! may not hold loopback addresses and ExternalName is then refused. So the tests use an
//! ExternalName Service naming 127.0.0.1 (and no aggregator routing); kube-apiserver still
//! verifies the server's certificate for `<service>.<namespace>.svc` against the caBundle.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Client;
use kube::api::{Api, PostParams};

use super::ControlPlane;
use super::pki::FRONT_PROXY_CLIENT;

impl ControlPlane {
    /// A client certificate (certificate PEM, key PEM) of the front-proxy CA with CN `name`:
    /// kube-apiserver's own with [`FRONT_PROXY_CLIENT`], a forgery with any other.
    pub fn mint_front_proxy(&self, name: &str) -> Result<(String, String)> {
        self.pki.mint_front_proxy(name)
    }

    /// kube-apiserver's front-proxy certificate and key, as it presents them.
    pub fn front_proxy_identity(&self) -> Result<(String, String)> {
        let read = |p: &std::path::Path| {
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
        };
        Ok((
            read(&self.pki.front_proxy_client_cert)?,
            read(&self.pki.front_proxy_client_key)?,
        ))
    }
}

/// The name the front proxy's certificate has.
pub const FRONT_PROXY_NAME: &str = FRONT_PROXY_CLIENT;

/// Registers `version.group` as served at https://127.0.0.1:`port` by a server whose
/// certificate `ca_pem` verifies for `service.namespace.svc`, and waits until kube-apiserver
/// finds it Available and proxies its discovery.
pub async fn register_api_service(
    client: &Client,
    (group, version): (&str, &str),
    (namespace, service): (&str, &str),
    port: u16,
    ca_pem: &str,
) -> Result<()> {
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": { "name": service, "namespace": namespace },
        "spec": {
            "type": "ExternalName",
            "externalName": "127.0.0.1",
            "ports": [{ "name": "https", "port": port, "protocol": "TCP" }],
        }
    }))?;
    Api::<Service>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &svc)
        .await
        .with_context(|| format!("creating Service {namespace}/{service}"))?;
    let name = format!("{version}.{group}");
    let api_service: APIService = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": {
            "group": group,
            "version": version,
            "service": { "namespace": namespace, "name": service, "port": port },
            "caBundle": base64_std(ca_pem.as_bytes()),
            "groupPriorityMinimum": 1000,
            "versionPriority": 15,
        }
    }))?;
    let api = Api::<APIService>::all(client.clone());
    api.create(&PostParams::default(), &api_service)
        .await
        .with_context(|| format!("creating APIService {name}"))?;
    let seen = std::sync::Mutex::new(String::new());
    let available = || async {
        let live = api.get(&name).await.ok()?;
        let conditions = live.status?.conditions?;
        if let Ok(mut seen) = seen.lock() {
            *seen = format!("{conditions:?}");
        }
        conditions
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True")
            .then_some(())
    };
    let last = || seen.lock().map(|s| s.clone()).unwrap_or_default();
    super::eventually_with(
        Duration::from_secs(60),
        &format!("APIService {name} Available"),
        last,
        available,
    )
    .await;
    // Available is one controller's finding; the proxy route is another's, a moment later.
    let path = format!("/apis/{group}/{version}");
    super::eventually(
        Duration::from_secs(60),
        &format!("{path} proxied"),
        || async {
            let request = http::Request::get(&path).body(Vec::new()).ok()?;
            client.request_text(request).await.ok().map(|_| ())
        },
    )
    .await;
    Ok(())
}

fn base64_std(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
