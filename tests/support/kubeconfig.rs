//! Self-contained kubeconfig files (all credentials inline), and clients built from them through
//! kube's own kubeconfig loader, so tests exercise exactly what `KUBECONFIG=...` gives the operator.

use std::path::Path;

use anyhow::{Context, Result};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::pki::User;

/// A kubeconfig for `user` against `server` (trusting `ca_pem`), with `namespace` as the
/// context's default namespace when given.
pub fn kubeconfig_yaml(
    server: &str,
    ca_pem: &str,
    user: &User,
    namespace: Option<&str>,
) -> Result<String> {
    let mut context = serde_json::json!({ "cluster": "control-plane", "user": user.name });
    if let Some(ns) = namespace {
        context["namespace"] = ns.into();
    }
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "control-plane",
            "cluster": {
                "server": server,
                "certificate-authority-data": STANDARD.encode(ca_pem),
            },
        }],
        "users": [{
            "name": user.name,
            "user": {
                "client-certificate-data": STANDARD.encode(&user.cert_pem),
                "client-key-data": STANDARD.encode(&user.key_pem),
            },
        }],
        "contexts": [{ "name": "control-plane", "context": context }],
        "current-context": "control-plane",
    });
    serde_yaml::to_string(&config).context("serialising kubeconfig")
}

/// A client from a kubeconfig file. Clients belong to the tokio runtime that created them, so
/// build one per test rather than sharing one between tests.
pub async fn client_from_kubeconfig(path: &Path) -> Result<Client> {
    super::init_crypto();
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    client_from(kubeconfig)
        .await
        .with_context(|| format!("loading kubeconfig {}", path.display()))
}

/// A client from kubeconfig text.
pub async fn client_from_yaml(yaml: &str) -> Result<Client> {
    super::init_crypto();
    client_from(Kubeconfig::from_yaml(yaml).context("parsing kubeconfig")?).await
}

async fn client_from(kubeconfig: Kubeconfig) -> Result<Client> {
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .context("resolving the kubeconfig's current context")?;
    Client::try_from(config).context("building a client")
}
