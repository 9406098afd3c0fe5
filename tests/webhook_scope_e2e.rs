//! The webhooks stay in their lane, end to end: `kubevirt-operator run --watch-namespaces
//! team-a` (self-managed certificates, webhooks reached by URL) registers webhooks that select
//! namespace `team-a` only, so a Machine elsewhere is not touched (no finalizer); and the
//! serving certificate it presents was valid from 5 minutes before it was issued.

mod access;
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DynamicObject, PostParams};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;

use access::{WAIT, create_namespace, fixture, machines};
use kubevirt_operator::api::names::{FINALIZER, NAMESPACE_NAME_LABEL};
use kubevirt_operator::certs::webhook_config::MACHINE_CLASS_WEBHOOK_NAME;
use kubevirt_operator::certs::x509::Cert;

fn machine(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": {}
    }))
    .expect("machine")
}

/// The certificate the webhook server at `url` presents, trusted through `ca_bundle`.
async fn served_certificate(url: &str, ca_bundle: &[u8]) -> Cert {
    let authority = url.trim_start_matches("https://");
    let authority = authority.split('/').next().expect("host:port");
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls::pki_types::pem::PemObject::pem_slice_iter(ca_bundle) {
        let der: CertificateDer<'static> = der.expect("bundle PEM");
        roots.add(der).expect("CA");
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect");
    let host = authority.rsplit_once(':').expect("port").0.to_owned();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(host).expect("name"), tcp)
        .await
        .expect("handshake");
    let leaf = tls.get_ref().1.peer_certificates().expect("certificates")[0].clone();
    Cert::from_der(leaf).expect("leaf")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_namespaces_confine_the_webhooks_and_certificates_are_backdated() {
    let started = Utc::now();
    let env = fixture(&["--watch-namespaces", "team-a"]).start().await;
    let (admin, op) = (env.admin_client().await, env.replica());
    // Both labelled with their names, as kube-apiserver 1.21+ does (`create_namespace`).
    create_namespace(&admin, "b").await;

    // In force in team-a: a created Machine comes back with the cleanup finalizer.
    let pp = PostParams::default();
    let deadline = Instant::now() + WAIT;
    for i in 0.. {
        let created = machines(&admin, "team-a")
            .create(&pp, &machine(&format!("a-{i}")))
            .await;
        if let Ok(m) = &created
            && m.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "webhooks not in force in team-a: {created:?}\n{}",
            op.log_tail(60)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    let elsewhere = machines(&admin, "b")
        .create(&pp, &machine("b-0"))
        .await
        .expect("a Machine outside the watched namespaces");
    assert_eq!(
        elsewhere.metadata.finalizers, None,
        "the operator touched a Machine outside --watch-namespaces"
    );

    let selector = json!({"matchExpressions": [
        {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": ["team-a"]}
    ]});
    let mutating = Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .get("kubevirt-operator")
        .await
        .expect("mutating configuration");
    let validating = Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .get("kubevirt-operator")
        .await
        .expect("validating configuration");
    let hooks = mutating.webhooks.clone().unwrap_or_default();
    for hook in &hooks {
        assert_eq!(json!(hook.namespace_selector), selector, "{}", hook.name);
    }
    for hook in validating.webhooks.iter().flatten() {
        // MachineClasses are cluster-scoped: no namespace to select (kube-apiserver ignores a
        // namespaceSelector for them anyway).
        let expected = if hook.name == MACHINE_CLASS_WEBHOOK_NAME {
            json!({})
        } else {
            selector.clone()
        };
        assert_eq!(json!(hook.namespace_selector), expected, "{}", hook.name);
    }
    // Machines, NetworkConfigurations, MachineSnapshots, MachineRestores, MachineClasses.
    assert_eq!(validating.webhooks.iter().flatten().count(), 5);

    // The served certificate: not-before 5 minutes before its issue, which came after start.
    let config = &hooks[0].client_config;
    let url = config.url.as_deref().expect("--webhook-url");
    let bundle = &config.ca_bundle.as_ref().expect("caBundle").0;
    let cert = served_certificate(url, bundle).await;
    let seen = Utc::now();
    let backdate = TimeDelta::minutes(5);
    assert!(
        cert.not_before <= seen - backdate,
        "not-before {} is less than 5 minutes before it was served ({seen})",
        cert.not_before
    );
    assert!(
        cert.not_before >= started - backdate - TimeDelta::seconds(2),
        "not-before {} is from before this operator started ({started})",
        cert.not_before
    );
}
