//! TLS behaviour of the real webhook server: protocol versions, swapping the serving certificate
//! under open connections, and reloading it from PEM files.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{HttpsConn, Server, ServingPair, TestCa, assert_serves, valid_review};
use kubevirt_operator::admission::VALIDATE_PATH;
use kubevirt_operator::tls::CertSlot;
use kubevirt_operator::tls::file_reload::PemFiles;
use rustls::ProtocolVersion;
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends one valid review over `conn` and asserts it is answered.
async fn assert_conn_serves(conn: &mut HttpsConn, uid: &str) {
    let body = serde_json::to_vec(&valid_review(uid)).expect("JSON");
    let response = conn
        .post_json(VALIDATE_PATH, &body)
        .await
        .unwrap_or_else(|e| panic!("{uid}: {e}"));
    assert_eq!(response.status, 200, "{uid}");
    assert_eq!(response.json()["response"]["uid"], uid);
}

/// The certificate a brand-new connection (full handshake) is served.
async fn fresh_handshake_cert(server: &Server, ca: &TestCa) -> CertificateDer<'static> {
    let conn = HttpsConn::connect(server.addr, ca.client_config(rustls::DEFAULT_VERSIONS))
        .await
        .expect("handshake");
    conn.peer_certificate()
}

#[tokio::test]
async fn tls_1_2_and_1_3_both_negotiate_and_serve() {
    let ca = TestCa::new("versions CA");
    let server = Server::start(&ca.issue("versions")).await;
    for (version, expected) in [
        (&rustls::version::TLS12, ProtocolVersion::TLSv1_2),
        (&rustls::version::TLS13, ProtocolVersion::TLSv1_3),
    ] {
        let mut conn = HttpsConn::connect(server.addr, ca.client_config(&[version]))
            .await
            .unwrap_or_else(|e| panic!("{expected:?} handshake: {e}"));
        assert_eq!(conn.protocol_version(), Some(expected));
        assert_conn_serves(&mut conn, &format!("{expected:?}")).await;
    }
    // An ordinary client pinned to each version, too.
    for version in [
        reqwest::tls::Version::TLS_1_2,
        reqwest::tls::Version::TLS_1_3,
    ] {
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).unwrap())
            .min_tls_version(version)
            .max_tls_version(version)
            .build()
            .expect("client");
        assert_serves(&client, &server, &format!("reqwest-{version:?}")).await;
    }
}

/// A ClientHello written by hand with `version` as the client's maximum (no supported_versions
/// extension), because no client in this build can speak TLS 1.1. Apart from the version it is
/// one the server accepts, which the TLS 1.2 control in the test shows.
fn client_hello(version: [u8; 2]) -> Vec<u8> {
    let mut body = version.to_vec();
    body.extend_from_slice(&[0x42; 32]); // random
    body.push(0); // no session id
    // ECDHE-ECDSA-AES128-GCM-SHA256 and ECDHE-RSA-AES128-GCM-SHA256 (TLS 1.2), then
    // ECDHE-ECDSA-AES128-SHA, ECDHE-RSA-AES128-SHA and AES128-SHA (valid in TLS 1.1).
    let suites: &[u8] = &[0xc0, 0x2b, 0xc0, 0x2f, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x2f];
    body.extend_from_slice(&(suites.len() as u16).to_be_bytes());
    body.extend_from_slice(suites);
    body.extend_from_slice(&[0x01, 0x00]); // null compression only
    let extensions: &[u8] = &[
        0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x17, 0x00, 0x1d, // groups: P-256, X25519
        0x00, 0x0b, 0x00, 0x02, 0x01, 0x00, // ec_point_formats: uncompressed
        0x00, 0x0d, 0x00, 0x08, 0x00, 0x06, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01, // sig algs
    ];
    body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    body.extend_from_slice(extensions);
    let mut handshake = vec![0x01]; // ClientHello
    handshake.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

/// The server's first bytes in reply to `hello`.
async fn first_reply(server: &Server, hello: &[u8]) -> Vec<u8> {
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    tcp.write_all(hello).await.expect("hello");
    let mut reply = vec![0u8; 7];
    tokio::time::timeout(Duration::from_secs(30), tcp.read_exact(&mut reply))
        .await
        .expect("the server replies")
        .expect("at least a record header and two bytes");
    reply
}

#[tokio::test]
async fn tls_1_1_and_plain_http_are_refused() {
    let ca = TestCa::new("refusal CA");
    let server = Server::start(&ca.issue("refusal")).await;

    // Control: the same hello offering TLS 1.2 gets a ServerHello.
    let reply = first_reply(&server, &client_hello([0x03, 0x03])).await;
    assert_eq!(
        (reply[0], reply[5]),
        (0x16, 0x02),
        "ServerHello expected, got {reply:02x?}"
    );
    // Offering at most TLS 1.1 gets a fatal alert (protocol_version or handshake_failure).
    let reply = first_reply(&server, &client_hello([0x03, 0x02])).await;
    assert_eq!(reply[0], 0x15, "expected an alert record, got {reply:02x?}");
    assert_eq!(reply[5], 2, "the alert must be fatal, got {reply:02x?}");
    assert!(
        matches!(reply[6], 70 | 40),
        "alert {} is not about the version",
        reply[6]
    );

    // Plain HTTP from an ordinary client gets no admission answer, only the refusal.
    let plain = reqwest::Client::builder().build().expect("plain client");
    let response = plain
        .post(format!("http://{}{VALIDATE_PATH}", server.addr))
        .json(&valid_review("plain"))
        .send()
        .await
        .expect("the server replies");
    assert_eq!(response.status(), 400);
    let text = response.text().await.expect("text");
    assert!(text.contains("HTTP request to an HTTPS server"), "{text:?}");

    assert_serves(&ca.reqwest_client(), &server, "still serving").await;
}

#[tokio::test]
async fn swapping_the_certificate_keeps_open_connections_and_serves_new_ones_the_new_one() {
    let ca = TestCa::new("swap CA");
    let (first, second) = (ca.issue("first"), ca.issue("second"));
    let server = Server::start(&first).await;

    let mut open = HttpsConn::connect(server.addr, ca.client_config(rustls::DEFAULT_VERSIONS))
        .await
        .expect("connect");
    assert_eq!(open.peer_certificate(), first.cert_der);
    assert_conn_serves(&mut open, "before-swap").await;

    server.slot.store(second.certified_key());

    // The open keep-alive connection carries on with the certificate it agreed on.
    assert_conn_serves(&mut open, "after-swap-same-connection").await;
    assert_eq!(open.peer_certificate(), first.cert_der);
    // A new connection is served the new certificate.
    assert_eq!(fresh_handshake_cert(&server, &ca).await, second.cert_der);

    // A rotation to a certificate from a new CA: clients that only know the old CA are refused
    // on new connections, clients that know the new one are served, the open connection lives on.
    let new_ca = TestCa::new("rotated CA");
    let third = new_ca.issue("third");
    server.slot.store(third.certified_key());
    let refused = HttpsConn::connect(server.addr, ca.client_config(rustls::DEFAULT_VERSIONS)).await;
    assert!(
        refused.is_err(),
        "old-CA client must not accept the new CA's certificate"
    );
    assert_eq!(fresh_handshake_cert(&server, &new_ca).await, third.cert_der);
    assert_conn_serves(&mut open, "after-ca-rotation-same-connection").await;
}

fn write_pair(dir: &Path, cert: &str, key: &str) {
    // Written one after the other, as a careless writer would: the watcher must cope.
    std::fs::write(dir.join("tls.crt"), cert).expect("write cert");
    std::fs::write(dir.join("tls.key"), key).expect("write key");
}

/// Polls new handshakes until one is served `want`, for at most `within`.
async fn wait_for_cert(
    server: &Server,
    ca: &TestCa,
    want: &ServingPair,
    within: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        if fresh_handshake_cert(server, ca).await == want.cert_der {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "the reloaded certificate was not served within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn pem_files_are_reloaded_and_a_broken_pair_keeps_the_last_good_one() {
    const EVERY: Duration = Duration::from_millis(100);
    let ca = TestCa::new("files CA");
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second, third) = (ca.issue("first"), ca.issue("second"), ca.issue("third"));
    write_pair(dir.path(), &first.cert_pem, &first.key_pem);

    let files = PemFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let slot = CertSlot::new();
    let loaded = files.load_into(&slot).await.expect("initial pair loads");
    let watcher = tokio::spawn(files.watch(Arc::clone(&slot), loaded, EVERY));
    let server = Server::start_with_slot(slot).await;
    assert_eq!(fresh_handshake_cert(&server, &ca).await, first.cert_der);

    write_pair(dir.path(), &second.cert_pem, &second.key_pem);
    let took = wait_for_cert(&server, &ca, &second, Duration::from_secs(10)).await;
    eprintln!("second pair served after {took:?}");

    // Broken states: a certificate with someone else's key, garbage, a missing key file.
    let broken: [(&str, &str, &str); 3] = [
        ("mismatched key", &third.cert_pem, &first.key_pem),
        ("garbage", "not a certificate", "not a key"),
        ("missing key", &second.cert_pem, ""),
    ];
    for (what, cert, key) in broken {
        write_pair(dir.path(), cert, key);
        if key.is_empty() {
            std::fs::remove_file(dir.path().join("tls.key")).expect("remove key");
        }
        // Many polls later the last good certificate must still be the one served.
        tokio::time::sleep(EVERY * 8).await;
        assert_eq!(
            fresh_handshake_cert(&server, &ca).await,
            second.cert_der,
            "{what}: the last good certificate must keep serving"
        );
        assert_serves(&ca.reqwest_client(), &server, what).await;
    }

    // And the watcher is still alive: a good pair after the broken ones is picked up.
    write_pair(dir.path(), &third.cert_pem, &third.key_pem);
    wait_for_cert(&server, &ca, &third, Duration::from_secs(10)).await;
    watcher.abort();
}
