use std::collections::BTreeMap;

use chrono::TimeDelta;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::certs::config::{CertificateArgs, Settings};
use crate::certs::issue::{issue_ca, issue_serving};
use crate::certs::{
    BUNDLE_KEY, CA_CERT_KEY, TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY, managed_labels, webhook_config,
};

fn meta() -> ObjectMeta {
    ObjectMeta {
        labels: Some(managed_labels()),
        ..ObjectMeta::default()
    }
}

fn tls(pairs: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: meta(),
        data: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

#[test]
fn status_shows_every_certificate_and_the_verdict() {
    crate::tls::install_crypto_provider();
    let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let s = Settings::new(
        "kubevirt-operator-system",
        Some("https://127.0.0.1:8443"),
        CertificateArgs::default().lifetimes().unwrap(),
    )
    .unwrap();
    let old = issue_ca(now - TimeDelta::hours(150), TimeDelta::hours(168)).unwrap();
    let ca = issue_ca(now, TimeDelta::hours(168)).unwrap();
    let sv = issue_serving(&ca, &s.serving_names(), now, TimeDelta::hours(24)).unwrap();
    let bundle = format!("{}{}", old.cert_pem, ca.cert_pem);
    let snapshot = Snapshot {
        ca: Some(tls(&[
            (TLS_CERT_KEY, &ca.cert_pem),
            (TLS_PRIVATE_KEY_KEY, &ca.key_pem),
        ])),
        serving: Some(tls(&[
            (TLS_CERT_KEY, &sv.cert_pem),
            (TLS_PRIVATE_KEY_KEY, &sv.key_pem),
            (CA_CERT_KEY, &ca.cert_pem),
        ])),
        bundle: Some(ConfigMap {
            metadata: meta(),
            data: Some(BTreeMap::from([(BUNDLE_KEY.to_owned(), bundle.clone())])),
            ..ConfigMap::default()
        }),
        mutating: Some(webhook_config::mutating(&s, bundle.as_bytes())),
        validating: None,
        api_service: None,
    };
    let text = render_status(
        &snapshot,
        "kubevirt-operator-system",
        WEBHOOK_CONFIGURATION,
        now,
    );
    assert!(
        text.contains(
            "CA (Secret kubevirt-operator-ca):\n  Subject:     CN=kubevirt-operator-ca@1800000000"
        ),
        "{text}"
    );
    assert!(text.contains("SANs:        kubevirt-operator-webhook, kubevirt-operator-webhook.kubevirt-operator-system, kubevirt-operator-webhook.kubevirt-operator-system.svc, kubevirt-operator-webhook.kubevirt-operator-system.svc.cluster.local, 127.0.0.1"), "{text}");
    assert!(
        text.contains("Not after:   2027-01-16T08:00:00Z (in 24h)"),
        "{text}"
    );
    assert!(
        text.contains("  [2]\n    Subject:     CN=kubevirt-operator-ca@1800000000"),
        "{text}"
    );
    assert!(
        text.contains("MutatingWebhookConfiguration: caBundle = the bundle (2 CA(s))"),
        "{text}"
    );
    assert!(
        text.contains("ValidatingWebhookConfiguration: not installed"),
        "{text}"
    );
    assert!(
        text.contains("kube-apiserver trusts the serving certificate (checked for 127.0.0.1)."),
        "{text}"
    );

    let later = render_status(
        &snapshot,
        "ns",
        WEBHOOK_CONFIGURATION,
        now + TimeDelta::hours(25),
    );
    assert!(later.contains("1h ago, EXPIRED"), "{later}");
    assert!(later.contains("would REJECT"), "{later}");
    assert!(text.contains("APIService: not installed"), "{text}");

    // An APIService that still trusts only the old CA is shown as differing.
    let stale = serde_json::json!({
        "metadata": { "name": crate::certs::api_service::NAME },
        "spec": {
            "group": "subresources.vitistack.io", "version": "v1alpha1",
            "groupPriorityMinimum": 1000, "versionPriority": 15,
            "caBundle": k8s_openapi::ByteString(old.cert_pem.clone().into_bytes()),
        },
    });
    let snapshot = Snapshot {
        api_service: Some(serde_json::from_value(stale).unwrap()),
        ..snapshot
    };
    let text = render_status(&snapshot, "ns", WEBHOOK_CONFIGURATION, now);
    assert!(
        text.contains("APIService: caBundle DIFFERS from the bundle"),
        "{text}"
    );
}
