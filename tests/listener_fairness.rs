//! One client cannot starve the others (src/tls/listener.rs, src/tls/admit.rs): while another
//! local address (127.0.0.2, the attacker) holds as many connections as each listener's global
//! cap, fresh probes and fresh webhook requests from 127.0.0.1 are answered. Run in-process on
//! loopback with the production limits; every attacker loop stops by itself.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kubevirt_operator::admission::{Admission, routes};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::telemetry::Metrics;
use kubevirt_operator::telemetry::health::{Readiness, probes_router, serve_plain};
use kubevirt_operator::telemetry::metrics::{ListenerRefusal, RefusedConnections};
use kubevirt_operator::tls::listener::{Drain, Limits};
use kubevirt_operator::tls::{CertSlot, install_crypto_provider, server};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinSet;

const ATTACKER: [u8; 4] = [127, 0, 0, 2];
/// How long the attack lasts at most: every attacker task ends by then.
const ATTACK: Duration = Duration::from_secs(30);

/// A connection from the attacker's address.
async fn attacker_connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((ATTACKER, 0)))?;
    socket.connect(addr).await
}

/// Sends `GET path` and reads one answer's head; None when the server closed or was silent for
/// `patience`.
async fn get(
    conn: &mut (impl AsyncRead + AsyncWrite + Unpin),
    path: &str,
    close: bool,
    patience: Duration,
) -> Option<String> {
    let connection = if close { "close" } else { "keep-alive" };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: {connection}\r\n\r\n");
    let exchange = async {
        conn.write_all(request.as_bytes()).await.ok()?;
        conn.flush().await.ok()?;
        let mut buf = vec![0u8; 2048];
        let n = conn.read(&mut buf).await.ok()?;
        (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    tokio::time::timeout(patience, exchange)
        .await
        .ok()
        .flatten()
}

/// `n` attacker connections to the probes, reopened at once whenever the server closes one,
/// until the attack ends: half ask `/healthz` every 500 ms on a kept-alive connection, half
/// send nothing (held until the request deadline cuts them).
fn hold_probe_connections(addr: SocketAddr, n: usize) -> JoinSet<()> {
    let mut set = JoinSet::new();
    let end = Instant::now() + ATTACK;
    for i in 0..n {
        let silent = i % 2 == 1;
        set.spawn(async move {
            while Instant::now() < end {
                let Ok(mut conn) = attacker_connect(addr).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if silent {
                    let mut buf = [0u8; 1];
                    let _ = tokio::time::timeout_at(end.into(), conn.read(&mut buf)).await;
                }
                while !silent && Instant::now() < end {
                    if get(&mut conn, "/healthz", false, Duration::from_secs(5))
                        .await
                        .is_none()
                    {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
    }
    set
}

/// Fresh probes as the kubelet makes them: a new connection each, 1 s to answer.
async fn fresh_probes(addr: SocketAddr, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        if let Ok(Ok(mut conn)) =
            tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await
            && let Some(head) = get(&mut conn, "/healthz", true, Duration::from_secs(1)).await
            && head.starts_with("HTTP/1.1 200")
        {
            ok += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_are_answered_while_another_address_holds_32_connections_and_tries_32_more() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = probes_router(Arc::new(Readiness::new()));
    let refused = RefusedConnections::default();
    let server = tokio::spawn(serve_plain(listener, Limits::PROBES, app, refused.clone()));
    let mut attack = hold_probe_connections(addr, 64);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ok = fresh_probes(addr, 9).await;
    attack.abort_all();
    server.abort();
    println!("fresh probes answered under attack: {ok} of 9");
    assert_eq!(
        ok, 9,
        "fresh probes answered while 127.0.0.2 held what it could"
    );
    assert!(refusals(&refused, "probes", "peer_cap") > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_requests_are_answered_while_another_address_holds_256_tls_connections() {
    install_crypto_provider();
    let ca = common::TestCa::new("fairness CA");
    let slot = CertSlot::new();
    slot.store(ca.issue("fairness").certified_key());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let admission = Arc::new(Admission::new(Catalog::default()).expect("admission"));
    let refused = RefusedConnections::default();
    let server = tokio::spawn(server::serve_with(
        listener,
        slot,
        routes::router(admission),
        std::future::pending(),
        Limits::WEBHOOK,
        Drain::default(),
        refused.clone(),
    ));
    let tls = tokio_rustls::TlsConnector::from(ca.client_config(rustls::DEFAULT_VERSIONS));
    let name = ServerName::IpAddress(addr.ip().into());

    // 256 TLS connections from 127.0.0.2, held open (idle, as kube-apiserver's are between
    // requests); one the server closes is opened again.
    let mut attack = JoinSet::new();
    let end = Instant::now() + ATTACK;
    let held = Arc::new(AtomicUsize::new(0));
    for _ in 0..256 {
        let (tls, name, held) = (tls.clone(), name.clone(), held.clone());
        attack.spawn(async move {
            while Instant::now() < end {
                if let Ok(tcp) = attacker_connect(addr).await
                    && let Ok(Ok(mut conn)) = tokio::time::timeout(
                        Duration::from_secs(20),
                        tls.connect(name.clone(), tcp),
                    )
                    .await
                {
                    held.fetch_add(1, Ordering::Relaxed);
                    let mut buf = [0u8; 64];
                    let _ = tokio::time::timeout_at(end.into(), conn.read(&mut buf)).await;
                    held.fetch_sub(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }
    // Until the attacker holds all it can: 256 before per-client caps, 64 with them.
    let settled = Instant::now() + Duration::from_secs(15);
    let mut last = (0, Instant::now());
    while Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = held.load(Ordering::Relaxed);
        if now == 256 || (now > 0 && now == last.0 && last.1.elapsed() > Duration::from_secs(2)) {
            break;
        }
        if now != last.0 {
            last = (now, Instant::now());
        }
    }
    println!(
        "the attacker holds {} TLS connections",
        held.load(Ordering::Relaxed)
    );

    let mut answered = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let request = async {
            let tcp = TcpStream::connect(addr).await.ok()?;
            let mut conn = tls.connect(name.clone(), tcp).await.ok()?;
            get(&mut conn, "/", true, Duration::from_secs(5)).await
        };
        if let Ok(Some(head)) = tokio::time::timeout(Duration::from_secs(5), request).await {
            assert!(head.starts_with("HTTP/1.1 "), "{head}");
            answered += 1;
        }
        println!("fresh webhook request took {:?}", started.elapsed());
    }
    attack.abort_all();
    server.abort();
    println!("fresh webhook requests answered under attack: {answered} of 5");
    assert_eq!(answered, 5, "answered while 127.0.0.2 held 256 connections");
    assert!(refusals(&refused, "webhook", "peer_cap") >= 192);
}

fn refusals(refused: &RefusedConnections, listener: &'static str, reason: &'static str) -> u64 {
    let labels = ListenerRefusal { listener, reason };
    refused.get_or_create(&labels).get()
}

/// Whether the server closes `conn` within 500 ms without answering.
async fn closed_at_once(conn: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(500), conn.read(&mut buf)).await;
    matches!(read, Ok(Ok(0) | Err(_)))
}

#[tokio::test]
async fn beyond_a_cap_a_connection_is_refused_at_once_and_counted() {
    let limits = Limits {
        max_connections: 3,
        max_connections_per_client: 2,
        ..Limits::METRICS
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let metrics = Metrics::new();
    let app = probes_router(Arc::new(Readiness::new()));
    let refused = metrics.listener_refused.clone();
    tokio::spawn(serve_plain(listener, limits, app, refused.clone()));

    let mut held = Vec::new();
    for _ in 0..2 {
        let mut conn = attacker_connect(addr).await.expect("attacker");
        assert!(
            get(&mut conn, "/healthz", false, Duration::from_secs(1))
                .await
                .is_some()
        );
        held.push(conn);
    }
    let mut third = attacker_connect(addr).await.expect("connect");
    assert!(closed_at_once(&mut third).await, "a third from one address");
    let mut ours = TcpStream::connect(addr).await.expect("connect");
    assert!(
        get(&mut ours, "/healthz", false, Duration::from_secs(1))
            .await
            .is_some()
    );
    let mut beyond = TcpStream::connect(addr).await.expect("connect");
    assert!(closed_at_once(&mut beyond).await, "a fourth in all");
    assert_eq!(refusals(&refused, "metrics", "peer_cap"), 1);
    assert_eq!(refusals(&refused, "metrics", "global_cap"), 1);
    let text = metrics.encode();
    assert!(
        text.contains(
            r#"kubevirt_operator_listener_refused_total{listener="metrics",reason="peer_cap"} 1"#
        ),
        "{text}"
    );
    // A slot given back is taken again.
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut again = TcpStream::connect(addr).await.expect("connect");
    let head = get(&mut again, "/healthz", false, Duration::from_secs(1)).await;
    assert!(head.is_some_and(|h| h.starts_with("HTTP/1.1 200")));
}

/// Reads answers on `conn` for `n` keep-alive requests; returns whether each said
/// `connection: close`, and whether the server then closed.
async fn keep_alive_answers(conn: &mut TcpStream, n: usize, pause: Duration) -> (Vec<bool>, bool) {
    let mut closes = Vec::new();
    for _ in 0..n {
        let Some(head) = get(conn, "/healthz", false, Duration::from_secs(1)).await else {
            break;
        };
        closes.push(head.to_ascii_lowercase().contains("connection: close"));
        tokio::time::sleep(pause).await;
    }
    (closes, closed_at_once(conn).await)
}

async fn serve_probes(limits: Limits) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = probes_router(Arc::new(Readiness::new()));
    tokio::spawn(serve_plain(listener, limits, app, Default::default()));
    addr
}

#[tokio::test]
async fn probes_close_every_connection_after_one_answer() {
    let addr = serve_probes(Limits::PROBES).await;
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    let (closes, closed) = keep_alive_answers(&mut conn, 2, Duration::ZERO).await;
    assert_eq!(closes, [true], "one answer, with Connection: close");
    assert!(closed);
}

#[tokio::test]
async fn a_connection_ends_after_its_request_count_or_its_age() {
    let by_count = serve_probes(Limits {
        max_requests_per_connection: 3,
        ..Limits::WEBHOOK
    })
    .await;
    let mut conn = TcpStream::connect(by_count).await.expect("connect");
    let (closes, closed) = keep_alive_answers(&mut conn, 5, Duration::ZERO).await;
    assert_eq!(closes, [false, false, true]);
    assert!(closed);

    let by_age = serve_probes(Limits {
        max_connection_age: Some(Duration::from_millis(750)),
        ..Limits::WEBHOOK
    })
    .await;
    let mut conn = TcpStream::connect(by_age).await.expect("connect");
    let (closes, closed) = keep_alive_answers(&mut conn, 5, Duration::from_millis(300)).await;
    // Requests at about 0, 0.3, 0.6 and 0.9 s: the first past 0.75 s is the last.
    assert_eq!(closes, [false, false, false, true]);
    assert!(closed);
}

/// Log lines, captured (the test's runtime is current-thread, so the accept loop logs here).
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_flood_of_refusals_is_counted_but_logged_once() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let limits = Limits {
        max_connections_per_client: 1,
        ..Limits::PROBES
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let refused = RefusedConnections::default();
    let app = probes_router(Arc::new(Readiness::new()));
    tokio::spawn(serve_plain(listener, limits, app, refused.clone()));
    let _held = attacker_connect(addr).await.expect("held");
    for _ in 0..50 {
        let mut conn = attacker_connect(addr).await.expect("connect");
        assert!(closed_at_once(&mut conn).await);
    }
    assert_eq!(refusals(&refused, "probes", "peer_cap"), 50);
    let text = String::from_utf8(log.0.lock().expect("log buffer").clone()).expect("UTF-8");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("refused a connection"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    for field in [
        "WARN",
        "listener=\"probes\"",
        "reason=\"peer_cap\"",
        "127.0.0.2",
    ] {
        assert!(lines[0].contains(field), "{field}: {}", lines[0]);
    }
}
