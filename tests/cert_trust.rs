//! The trust matrix of a CA rotation, with real TLS handshakes over loopback against the
//! project's own HTTPS server: serving certificates from the old and the new CA, presented to
//! clients holding the old, the new and the merged bundle. The merged bundle is what the
//! rotation publishes before anything is served from the new CA; this shows why that order
//! keeps every handshake working, and that the engine's own trust check agrees with rustls.

use std::net::SocketAddr;
use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use kubevirt_operator::admission::{Admission, routes};
use kubevirt_operator::certs::config::{CertificateArgs, Settings};
use kubevirt_operator::certs::issue::{PemPair, issue_ca, issue_serving};
use kubevirt_operator::certs::x509::Cert;
use kubevirt_operator::certs::{bundle, trust};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::tls::{CertSlot, install_crypto_provider, keypair, server};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;

fn cert(p: &PemPair) -> Cert {
    Cert::from_pem(p.cert_pem.as_bytes()).expect("parse")
}

/// Handshakes with `addr` trusting exactly `bundle`; returns the certificate presented.
async fn handshake(addr: SocketAddr, bundle: &[Cert]) -> Result<CertificateDer<'static>, String> {
    let mut roots = RootCertStore::empty();
    for ca in bundle {
        roots
            .add(ca.der.clone())
            .expect("CA usable as trust anchor");
    }
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").expect("server name");
    let tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (_, conn) = tls.get_ref();
    conn.peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.clone().into_owned())
        .ok_or_else(|| "no certificate presented".to_owned())
}

#[tokio::test]
async fn old_and_new_serving_certificates_against_old_new_and_merged_bundles() {
    install_crypto_provider();
    let now = Utc::now();
    let settings = Settings::new(
        "kubevirt-operator-system",
        Some("https://127.0.0.1:8443"),
        CertificateArgs::default().lifetimes().expect("lifetimes"),
    )
    .expect("settings");
    let names = settings.serving_names();
    let old_ca = issue_ca(now - TimeDelta::hours(140), TimeDelta::hours(168)).expect("old CA");
    let new_ca = issue_ca(now, TimeDelta::hours(168)).expect("new CA");
    let old_serving = issue_serving(
        &old_ca,
        &names,
        now - TimeDelta::hours(1),
        TimeDelta::hours(24),
    )
    .expect("old serving");
    let new_serving =
        issue_serving(&new_ca, &names, now, TimeDelta::hours(24)).expect("new serving");

    let bundles = [
        ("old", vec![cert(&old_ca)]),
        ("new", vec![cert(&new_ca)]),
        (
            "merged",
            bundle::merge([&cert(&old_ca)], [&cert(&new_ca)], now),
        ),
    ];
    assert_eq!(bundles[2].1.len(), 2);

    let slot = CertSlot::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let admission = Arc::new(
        Admission::new(Catalog::with_default("medium").expect("catalog")).expect("admission"),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(
        listener,
        slot.clone(),
        routes::router(admission),
        async {
            let _ = stopped.await;
        },
    ));

    let mut results = Vec::new();
    for (serving_name, serving) in [("old", &old_serving), ("new", &new_serving)] {
        slot.store(
            keypair::certified_key(serving.cert_pem.as_bytes(), serving.key_pem.as_bytes())
                .expect("pair"),
        );
        for (bundle_name, cas) in &bundles {
            let real = handshake(addr, cas).await;
            if let Ok(presented) = &real {
                assert_eq!(
                    presented,
                    &cert(serving).der,
                    "the slot's certificate is served"
                );
            }
            // The rotation engine's own check must agree with the real handshake.
            let engine = trust::verify(&cert(serving), cas, "127.0.0.1", now);
            assert_eq!(
                real.is_ok(),
                engine.is_ok(),
                "serving {serving_name} / bundle {bundle_name}: handshake {real:?}, engine {engine:?}"
            );
            results.push((serving_name, *bundle_name, real.is_ok()));
        }
    }
    assert_eq!(
        results,
        [
            ("old", "old", true),
            ("old", "new", false),
            ("old", "merged", true),
            ("new", "old", false),
            ("new", "new", true),
            ("new", "merged", true),
        ]
    );

    // After the old CA expires it leaves the merged bundle; a certificate it signed (capped to
    // its lifetime) has expired with it, so nothing that is served loses trust.
    let after = cert(&old_ca).not_after;
    let pruned = bundle::merge(&bundles[2].1, [], after);
    assert_eq!(pruned, vec![cert(&new_ca)]);
    assert!(cert(&old_serving).not_after <= after);

    let _ = stop.send(());
    server.await.expect("server task").expect("server");
}

#[tokio::test]
async fn a_certificate_for_the_service_is_refused_for_another_host() {
    install_crypto_provider();
    let now = Utc::now();
    let in_cluster = Settings::new(
        "kubevirt-operator-system",
        None,
        CertificateArgs::default().lifetimes().expect("lifetimes"),
    )
    .expect("settings");
    let ca = issue_ca(now, TimeDelta::hours(168)).expect("CA");
    let s = issue_serving(&ca, &in_cluster.serving_names(), now, TimeDelta::hours(24))
        .expect("serving");
    let slot = CertSlot::new();
    slot.store(keypair::certified_key(s.cert_pem.as_bytes(), s.key_pem.as_bytes()).expect("pair"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let admission = Arc::new(
        Admission::new(Catalog::with_default("medium").expect("catalog")).expect("admission"),
    );
    let server = tokio::spawn(server::serve(
        listener,
        slot,
        routes::router(admission),
        std::future::pending(),
    ));
    // No 127.0.0.1 SAN: a client connecting by IP refuses it, as the engine's check says.
    let err = handshake(addr, &[cert(&ca)])
        .await
        .expect_err("name mismatch");
    assert!(
        err.contains("NotValidForName") || err.contains("not valid for name"),
        "{err}"
    );
    assert!(trust::verify(&cert(&s), &[cert(&ca)], "127.0.0.1", now).is_err());
    assert!(
        trust::verify(
            &cert(&s),
            &[cert(&ca)],
            "kubevirt-operator-webhook.kubevirt-operator-system.svc",
            now
        )
        .is_ok()
    );
    server.abort();
}
