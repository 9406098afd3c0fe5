//! Kept-alive connections through a swap, and a leader change mid-rotation.

#[allow(unused_imports)]
use crate::*;
use k8s_openapi::ByteString;
use kubevirt_operator::admission::VALIDATE_PATH;
use kubevirt_operator::certs::config::{Lifetimes, RenewBefore};
use kubevirt_operator::certs::store::Store;
use kubevirt_operator::certs::x509::Cert;
use kubevirt_operator::certs::{CA_SECRET, TLS_CERT_KEY, issue};
use std::sync::Arc;
use std::time::Instant;

/// A keep-alive connection opened before a Secret-driven swap keeps working with the
/// certificate it agreed on; new handshakes get the new certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keep_alive_connections_survive_a_secret_driven_swap() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-keepalive").await;
    let lifetimes = Lifetimes::new(secs(168 * 3600), secs(24 * 3600), RenewBefore::Percent(20))
        .expect("lifetimes");
    let op = Operator::start(&client, &ns, lifetimes).await;
    let store = Store::new(client.clone(), &ns);
    until_state(&store, "settled", secs(30), |o| settled(o, &op)).await;
    let o = observed(&store).await;
    let first = serving_of(&o).expect("serving");
    let config = client_config(&bundle_of(&o));
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], op.port));
    let mut conn = common::HttpsConn::connect(addr, config.clone())
        .await
        .expect("connect");
    post(&mut conn, "before").await;
    assert_eq!(conn.peer_certificate(), first.der);

    let asked = Instant::now();
    store
        .request_rotation(false, chrono::Utc::now())
        .await
        .expect("request rotation");
    until_state(&store, "new serving certificate served", secs(30), |o| {
        serving_of(o).is_some_and(|s| s != first) && settled(o, &op)
    })
    .await;
    let second = serving_of(&observed(&store).await).expect("serving");
    eprintln!(
        "serving certificate replaced and loaded {:?} after the request",
        asked.elapsed()
    );

    post(&mut conn, "after").await;
    assert_eq!(
        conn.peer_certificate(),
        first.der,
        "the open connection keeps its certificate"
    );
    // A new client configuration: no TLS session to resume, so a full handshake.
    let fresh = common::HttpsConn::connect(addr, client_config(&bundle_of(&o)))
        .await
        .expect("connect");
    assert_eq!(
        fresh.peer_certificate(),
        second.der,
        "new handshakes get the new certificate"
    );
}

fn client_config(bundle: &[Cert]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in bundle {
        roots.add(ca.der.clone()).expect("root");
    }
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

async fn post(conn: &mut common::HttpsConn, uid: &str) {
    let body = serde_json::to_vec(&common::valid_review(uid)).expect("JSON");
    let r = conn
        .post_json(VALIDATE_PATH, &body)
        .await
        .expect("request on the open connection");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["response"]["uid"], uid);
}

/// A leader issues a new CA and is replaced before it could publish it (its CA already older
/// than the publish grace). The new leader publishes the CA, stamps the webhook configurations
/// with the time of that write, and switches the serving certificate to the new CA only a full
/// grace later, counted from the stamp: under a stream of Machine creates, none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_change_between_ca_issue_and_serving_issue_fails_no_admission() {
    use kubevirt_operator::certs::published::{Published, published};
    use kubevirt_operator::certs::{CA_BUNDLE_WRITTEN_ANNOTATION, TLS_PRIVATE_KEY_KEY};

    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-handover").await;
    // Long lifetimes: nothing comes due on its own; the grace is the full PUBLISH_GRACE.
    let lifetimes =
        Lifetimes::new(secs(3600), secs(1200), RenewBefore::Percent(20)).expect("lifetimes");
    let mut op = Operator::start(&client, &ns, lifetimes).await;
    let grace = op.settings(&ns, lifetimes).publish_grace;
    let store = Store::new(client.clone(), &ns);
    wait_for_webhooks(&client, &ns).await;
    until_state(&store, "settled", secs(30), |o| settled(o, &op)).await;
    let first_serving = serving_of(&observed(&store).await).expect("serving certificate");

    let started = Instant::now();
    let load = Load::start(&client, &ns);
    tokio::time::sleep(secs(1)).await;
    // The first leader issues a CA (a minute ago) and is gone before it publishes it.
    op.stop_manager();
    let snapshot = store.snapshot().await.expect("snapshot");
    let ca = issue::issue_ca(
        chrono::Utc::now() - chrono::TimeDelta::minutes(1),
        lifetimes.ca,
    )
    .expect("CA");
    let data = [
        (TLS_CERT_KEY, &ca.cert_pem),
        (TLS_PRIVATE_KEY_KEY, &ca.key_pem),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect();
    store
        .write_tls_secret(CA_SECRET, snapshot.ca.as_ref(), data)
        .await
        .expect("the first leader's CA");
    let new_ca = Cert::from_pem(ca.cert_pem.as_bytes()).expect("CA parses");

    // The next leader.
    tokio::time::sleep(secs(1)).await;
    op.start_manager(&client, &ns, lifetimes);
    let switched = until_state(&store, "serving from the new CA", secs(60), |o| {
        ca_of(o).as_ref() == Some(&new_ca) && settled(o, &op)
    })
    .await;
    let o = observed(&store).await;
    let Published::At(stamped) = published(&o, &op.settings(&ns, lifetimes)) else {
        panic!(
            "the webhook configurations carry no {CA_BUNDLE_WRITTEN_ANNOTATION}: {:#?}",
            o.mutating
        );
    };
    let serving = serving_of(&o).expect("serving certificate");
    assert_ne!(serving, first_serving);
    // Certificate times have whole seconds.
    assert!(
        serving.issued_at() + chrono::TimeDelta::seconds(1) >= stamped + grace,
        "serving certificate issued at {}, before the grace ({grace}) after the webhooks were written at {stamped}",
        serving.issued_at()
    );
    tokio::time::sleep(secs(3)).await;
    let outcomes = load.finish().await;
    let t = tally(&outcomes, started, Instant::now());
    eprintln!(
        "leader change before publishing: switched after {switched:?}; {} Machine creates, {} failed, {} not mutated",
        t.made,
        t.failed.len(),
        t.unmutated
    );
    assert!(t.made > 20, "the load kept creating Machines: {}", t.made);
    assert!(
        t.failed.is_empty(),
        "failed admissions across the handover: {:?}",
        t.failed
    );
    assert_eq!(t.unmutated, 0);
}
