//! The limits every listener shares (src/tls/listener.rs): slow headers and slow bodies are cut
//! at the request deadline, also after an `Expect: 100-continue`; idle keep-alive connections
//! are closed. Run in-process with short limits, on the same accept loop the webhook (TLS),
//! metrics and probe listeners use; the caps are `tests/listener_fairness.rs`'s.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubevirt_operator::admission::{Admission, MUTATE_PATH, routes};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::telemetry::health::{Readiness, probes_router, serve_plain};
use kubevirt_operator::tls::listener::{Drain, Limits};
use kubevirt_operator::tls::{CertSlot, install_crypto_provider, server};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMITS: Limits = Limits {
    name: "test",
    max_connections: 2,
    max_connections_per_client: 2,
    max_requests_per_connection: u32::MAX,
    max_connection_age: None,
    max_streams_per_connection: 8,
    max_stream_wait: Duration::from_secs(1),
    request_timeout: Duration::from_secs(1),
    idle_timeout: Duration::from_secs(2),
};

async fn probes() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = probes_router(Arc::new(Readiness::new()));
    tokio::spawn(serve_plain(listener, LIMITS, app, Default::default()));
    addr
}

/// Reads until the peer closes; returns what came and when it closed.
async fn until_closed(conn: &mut (impl AsyncReadExt + Unpin)) -> (Vec<u8>, Instant) {
    let mut out = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return (out, Instant::now()),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
}

#[tokio::test]
async fn slow_headers_are_cut_at_the_request_deadline() {
    let addr = probes().await;
    let conn = TcpStream::connect(addr).await.expect("connect");
    let (mut read, mut write) = conn.into_split();
    let start = Instant::now();
    write
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // One more header line every 200ms, forever: a slowloris.
    let dribble = tokio::spawn(async move {
        for i in 0.. {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if write
                .write_all(format!("X-{i}: y\r\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    });
    let (answer, closed) = tokio::time::timeout(Duration::from_secs(10), until_closed(&mut read))
        .await
        .expect("the server closes the connection");
    dribble.abort();
    let took = closed - start;
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "closed after {took:?}"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let addr = probes().await;
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = conn.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let answered = Instant::now();
    let (rest, closed) = tokio::time::timeout(Duration::from_secs(10), until_closed(&mut conn))
        .await
        .expect("the server closes the idle connection");
    assert!(rest.is_empty());
    let idle = closed - answered;
    // Longer than a request may take: only the idle limit closes it.
    assert!(
        idle >= Duration::from_millis(1900) && idle < Duration::from_secs(4),
        "closed after {idle:?} idle"
    );
}

/// Over TLS, on the webhook server: the interim `100 Continue` does not restart the request's
/// deadline, so a body sent slowly after it is cut a request deadline after the first byte.
#[tokio::test]
async fn expect_100_continue_does_not_restart_the_request_deadline() {
    install_crypto_provider();
    let ca = common::TestCa::new("limits CA");
    let slot = CertSlot::new();
    slot.store(ca.issue("limits").certified_key());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let admission = Arc::new(Admission::new(Catalog::default()).expect("admission"));
    let app = routes::router(admission);
    tokio::spawn(server::serve_with(
        listener,
        slot,
        app,
        std::future::pending(),
        LIMITS,
        Drain::default(),
        Default::default(),
    ));

    let tcp = TcpStream::connect(addr).await.expect("connect");
    let tls = tokio_rustls::TlsConnector::from(ca.client_config(rustls::DEFAULT_VERSIONS))
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
        .expect("handshake");
    let (mut read, mut write) = tokio::io::split(tls);
    let start = Instant::now();
    write
        .write_all(
            format!(
                "POST {MUTATE_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Expect: 100-continue\r\nContent-Length: 100000\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = read.read(&mut buf).await.expect("interim answer");
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 100 Continue"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    // The body's first byte comes late (restarting the deadline there would allow 1.7s), the
    // rest slowly.
    let dribble = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        loop {
            if write.write_all(b" ").await.is_err() || write.flush().await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let (_, closed) = tokio::time::timeout(Duration::from_secs(10), until_closed(&mut read))
        .await
        .expect("the server closes the slow request");
    dribble.abort();
    let took = closed - start;
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(1500),
        "closed {took:?} after the request began (limit {:?})",
        LIMITS.request_timeout
    );
}
