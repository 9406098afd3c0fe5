//! The webhook configurations an operator run outside the cluster (`--webhook-url`) fills: what
//! the chart and manifests/ install in a cluster, here for the URL (the operator creates none).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, PostParams};
use kube::{Client, Resource};

use kubevirt_operator::certs::{CertificateArgs, Settings, webhook_config};
use kubevirt_operator::config::WatchScope;

/// Settings naming `url`, the default configuration name, and `scope`.
pub fn url_settings(namespace: &str, url: &str, scope: &WatchScope) -> Settings {
    let lifetimes = CertificateArgs::default()
        .lifetimes()
        .expect("default lifetimes");
    Settings::new(namespace, Some(url), lifetimes)
        .expect("settings")
        .with_watch_scope(scope)
}

async fn create_or_replace<K>(api: &Api<K>, obj: &K)
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = obj.meta().name.clone().expect("a name");
    let pp = PostParams::default();
    match api.get_opt(&name).await.expect("get webhook configuration") {
        None => {
            api.create(&pp, obj)
                .await
                .expect("create webhook configuration");
        }
        Some(live) => {
            let mut obj = obj.clone();
            obj.meta_mut().resource_version = live.meta().resource_version.clone();
            api.replace(&name, &pp, &obj)
                .await
                .expect("replace webhook configuration");
        }
    }
}

/// Installs both configurations for `settings` (no caBundle), replacing any of the same name.
pub async fn install(client: &Client, settings: &Settings) {
    create_or_replace(
        &Api::<MutatingWebhookConfiguration>::all(client.clone()),
        &webhook_config::mutating(settings, b""),
    )
    .await;
    create_or_replace(
        &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        &webhook_config::validating(settings, b""),
    )
    .await;
}

/// Installs both for an operator at `url` in `namespace`, watching every namespace.
pub async fn install_for_url(client: &Client, namespace: &str, url: &str) {
    install(client, &url_settings(namespace, url, &WatchScope::All)).await;
}
