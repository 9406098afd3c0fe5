//! Issue 25: with `--client-ca-file`, only a caller presenting a certificate that CA signed
//! (kube-apiserver, through its AdmissionConfiguration) gets an answer from the webhooks; any
//! other caller's handshake fails, so no pod can use the access check as an oracle. The real
//! webhook server, on loopback.

mod common;

use std::sync::Arc;

use common::{TestCa, valid_review};
use kubevirt_operator::admission::{Admission, VALIDATE_PATH, routes};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::tls::client_auth;
use kubevirt_operator::tls::listener::{Drain, Limits};
use kubevirt_operator::tls::{CertSlot, install_crypto_provider, server};
use tokio::net::TcpListener;

fn client(ca: &TestCa, identity: Option<reqwest::Identity>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).expect("CA"))
        .http1_only()
        .no_proxy()
        .timeout(std::time::Duration::from_secs(5));
    if let Some(id) = identity {
        b = b.identity(id);
    }
    b.build().expect("client")
}

#[tokio::test]
async fn only_callers_with_a_certificate_of_the_client_ca_get_an_answer() {
    install_crypto_provider();
    let serving_ca = TestCa::new("serving CA");
    let callers_ca = TestCa::new("kube-apiserver's client CA");
    let stranger_ca = TestCa::new("someone else's CA");
    let slot = CertSlot::new();
    slot.store(serving_ca.issue("webhook").certified_key());
    let verifier = client_auth::from_pem(
        std::path::Path::new("client-ca.pem"),
        callers_ca.cert_pem().as_bytes(),
    )
    .expect("client CA");
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let admission = Arc::new(Admission::new(Catalog::default()).expect("schema"));
    tokio::spawn(server::serve_authenticated(
        listener,
        slot,
        Some(verifier),
        routes::router(admission),
        std::future::pending::<()>(),
        Limits::WEBHOOK,
        Drain::default(),
        Default::default(),
    ));
    let url = format!("https://{addr}{VALIDATE_PATH}");
    let body = serde_json::to_vec(&valid_review("u1")).expect("JSON");
    let identity = |ca: &TestCa, name: &str| {
        let pair = ca.issue(name);
        reqwest::Identity::from_pem(format!("{}{}", pair.cert_pem, pair.key_pem).as_bytes())
            .expect("identity")
    };

    // kube-apiserver, with its client certificate: answered.
    let answer = client(&serving_ca, Some(identity(&callers_ca, "kube-apiserver")))
        .post(&url)
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("an answer for the API server");
    assert_eq!(answer.status(), 200);
    let json: serde_json::Value = answer.json().await.expect("JSON");
    assert_eq!(json["response"]["uid"], "u1");

    // No certificate, or one another CA signed: no answer at all.
    for (who, id) in [
        ("no certificate", None),
        (
            "a stranger's certificate",
            Some(identity(&stranger_ca, "pod")),
        ),
    ] {
        let result = client(&serving_ca, id)
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        assert!(result.is_err(), "{who}: answered {result:?}");
    }
}
