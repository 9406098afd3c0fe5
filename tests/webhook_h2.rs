//! HTTP/2 on the webhook listener (src/tls/h2.rs, src/tls/streams.rs), against the real server
//! in-process on loopback with the production limits: one connection carries 200 concurrent
//! reviews while another address holds every connection it may, fills each with streams that
//! hold an in-flight slot, and floods reviews besides; rapid reset
//! ends the connection that does it; draining sends GOAWAY and the stream in flight finishes;
//! a client without ALPN still speaks HTTP/1.1. Tests wait for states, never for durations.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use kubevirt_operator::admission::{Admission, VALIDATE_PATH, routes};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::telemetry::metrics::{ListenerRefusal, RefusedConnections};
use kubevirt_operator::tls::listener::{Drain, Draining, Limits};
use kubevirt_operator::tls::{CertSlot, install_crypto_provider, server};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::oneshot;

mod webhook_h2 {
    pub mod frames;
}
use webhook_h2::frames::{self, Frame};

const ATTACKER: [u8; 4] = [127, 0, 0, 2];

struct Started {
    addr: SocketAddr,
    ca: common::TestCa,
    refused: RefusedConnections,
    stop: oneshot::Sender<()>,
}

async fn start(limits: Limits, drain: Drain) -> Started {
    install_crypto_provider();
    let ca = common::TestCa::new("h2 CA");
    let slot = CertSlot::new();
    slot.store(ca.issue("h2").certified_key());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let admission = Arc::new(Admission::new(Catalog::default()).expect("admission"));
    let refused = RefusedConnections::default();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server::serve_with(
        listener,
        slot,
        routes::router(admission),
        async {
            let _ = stopped.await;
        },
        limits,
        drain,
        refused.clone(),
    ));
    Started {
        addr,
        ca,
        refused,
        stop,
    }
}

/// The test CA's client configuration offering `alpn` only.
fn client_config(ca: &common::TestCa, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut config = (*ca.client_config(rustls::DEFAULT_VERSIONS)).clone();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

async fn tcp_from(from: IpAddr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    let tcp = socket.connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// One TLS connection from `from`, ALPN `h2` chosen, as an HTTP/2 client.
async fn h2_client(s: &Started, from: IpAddr) -> Option<h2::client::SendRequest<Bytes>> {
    let tcp = tcp_from(from, s.addr).await.ok()?;
    let name = rustls::pki_types::ServerName::IpAddress(s.addr.ip().into());
    let config = client_config(&s.ca, &[b"h2", b"http/1.1"]);
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .ok()?;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    // As Go's client: at most 100 streams open until the server's SETTINGS say otherwise.
    let (send, conn) = h2::client::Builder::new()
        .initial_max_send_streams(100)
        .handshake(tls)
        .await
        .ok()?;
    tokio::spawn(conn);
    Some(send)
}

/// Sends a valid review as stream on `send`; its status and answer.
async fn review(
    send: &h2::client::SendRequest<Bytes>,
    uid: &str,
) -> Result<(u16, Vec<u8>), h2::Error> {
    let body = serde_json::to_vec(&common::valid_review(uid)).expect("JSON");
    let request = http::Request::post(format!("https://127.0.0.1{VALIDATE_PATH}"))
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(())
        .expect("request");
    let mut send = send.clone().ready().await?;
    let (response, mut stream) = send.send_request(request, false)?;
    stream.send_data(Bytes::from(body), true)?;
    let response = response.await?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut answer = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        answer.extend_from_slice(&chunk);
    }
    Ok((status, answer))
}

/// A stream that declares a 1000-byte review and never sends it.
async fn silent_stream(
    send: &h2::client::SendRequest<Bytes>,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let request = http::Request::post(format!("https://127.0.0.1{VALIDATE_PATH}"))
        .header("content-type", "application/json")
        .header("content-length", 1000)
        .body(())
        .expect("request");
    let mut send = send.clone().ready().await.expect("stream capacity");
    send.send_request(request, false).expect("stream")
}

fn allowed(answer: &[u8], uid: &str) -> bool {
    let v: serde_json::Value = serde_json::from_slice(answer).unwrap_or_default();
    v["response"]["uid"] == uid && v["response"]["allowed"] == true
}

/// Waits (at most a minute) for `done` to hold.
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_reviews_on_one_connection_all_pass_while_another_address_floods() {
    let s = start(Limits::WEBHOOK, Drain::default()).await;
    let attacker: IpAddr = ATTACKER.into();
    // 127.0.0.2 holds all the connections it may (64), and on each 84 streams that never send
    // their body (each holds an in-flight slot until the request deadline) and 16 reviews
    // sent in a loop: 6400 streams.
    let flooding = Arc::new(AtomicBool::new(true));
    let (attacks, answered) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut held = Vec::new();
    for _ in 0..Limits::WEBHOOK.max_connections_per_client {
        let send = h2_client(&s, attacker).await.expect("attacker connection");
        for _ in 0..84 {
            held.push(silent_stream(&send).await);
        }
        for i in 0..16 {
            let (send, flooding) = (send.clone(), flooding.clone());
            let (attacks, answered) = (attacks.clone(), answered.clone());
            tokio::spawn(async move {
                while flooding.load(Ordering::Relaxed) {
                    attacks.fetch_add(1, Ordering::Relaxed);
                    match review(&send, &format!("flood-{i}")).await {
                        Ok((200, _)) => answered.fetch_add(1, Ordering::Relaxed),
                        Ok(_) => 0,
                        Err(_) => break,
                    };
                }
            });
        }
    }
    // Its 65th connection is refused at the per-address cap.
    if let Some(send) = h2_client(&s, attacker).await {
        assert!(review(&send, "65th").await.is_err(), "a 65th connection");
    }
    let peer_cap = ListenerRefusal {
        listener: "webhook",
        reason: "peer_cap",
    };
    until("the 65th connection refused", || {
        s.refused.get_or_create(&peer_cap).get() >= 1
    })
    .await;
    until("every flooding loop sending", || {
        attacks.load(Ordering::Relaxed) >= 64 * 16
    })
    .await;

    // 200 reviews at once from 127.0.0.1 over one connection.
    let ours = h2_client(&s, common::LOCALHOST)
        .await
        .expect("our connection");
    let reviews = (0..200).map(|i| {
        let ours = ours.clone();
        async move {
            let uid = format!("burst-{i}");
            match review(&ours, &uid).await {
                Ok((200, answer)) if allowed(&answer, &uid) => Ok(()),
                Ok((status, answer)) => {
                    Err(format!("{status} {}", String::from_utf8_lossy(&answer)))
                }
                Err(e) => Err(format!("{e:?}")),
            }
        }
    });
    let results = futures::future::join_all(reviews).await;
    flooding.store(false, Ordering::Relaxed);
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    println!(
        "flood: {} reviews sent, {} answered 200; ours: {} of 200 failed",
        attacks.load(Ordering::Relaxed),
        answered.load(Ordering::Relaxed),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} failed, first: {:?}",
        failed.len(),
        failed.first()
    );
    drop(s.stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_ends_the_connection_and_others_are_still_answered() {
    let s = start(Limits::WEBHOOK, Drain::default()).await;
    let tcp = tcp_from(ATTACKER.into(), s.addr).await.expect("connect");
    let mut tls = frames::open(tcp, client_config(&s.ca, &[b"h2"])).await;
    // 200 streams, each reset as soon as it is opened, in one write.
    let mut burst = Vec::new();
    for i in 0..200u32 {
        let id = 2 * i + 1;
        let headers = frames::post_headers(VALIDATE_PATH, 10);
        burst.extend(frames::frame(
            frames::HEADERS,
            frames::END_HEADERS,
            id,
            &headers,
        ));
        burst.extend(frames::frame(
            frames::RST_STREAM,
            0,
            id,
            &frames::CANCEL.to_be_bytes(),
        ));
    }
    let _ = tls.write_all(&burst).await;
    let mut goaway = None;
    let read = async {
        while let Some(f) = frames::next(&mut tls).await {
            if f.kind == frames::GOAWAY {
                goaway = Some(frames::goaway_code(&f));
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the server closes the connection");
    assert_eq!(
        goaway,
        Some(frames::ENHANCE_YOUR_CALM),
        "GOAWAY ENHANCE_YOUR_CALM"
    );
    let ours = h2_client(&s, common::LOCALHOST).await.expect("connect");
    let (status, answer) = review(&ours, "after-reset").await.expect("answered");
    assert_eq!(status, 200);
    assert!(allowed(&answer, "after-reset"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_sends_goaway_and_the_stream_in_flight_finishes() {
    let draining = Draining::default();
    let drain = Drain {
        period: Duration::from_secs(60),
        draining: draining.clone(),
    };
    let s = start(Limits::WEBHOOK, drain).await;
    let tcp = tcp_from(common::LOCALHOST, s.addr).await.expect("connect");
    let mut tls = frames::open(tcp, client_config(&s.ca, &[b"h2"])).await;
    let body = serde_json::to_vec(&common::valid_review("in-flight")).expect("JSON");
    // Stream 1's headers, its body held back; a PING after them, answered once they are read.
    let mut start = frames::frame(
        frames::HEADERS,
        frames::END_HEADERS,
        1,
        &frames::post_headers(VALIDATE_PATH, body.len()),
    );
    start.extend(frames::frame(frames::PING, 0, 0, b"inflight"));
    tls.write_all(&start).await.expect("headers");
    let is_ack = |f: &Frame| f.kind == frames::PING && f.flags & frames::ACK != 0;
    while !frames::next(&mut tls).await.is_some_and(|f| is_ack(&f)) {}

    let _ = s.stop.send(());
    until("draining", || draining.is_draining()).await;
    loop {
        let f = frames::next(&mut tls).await.expect("GOAWAY before close");
        if f.kind == frames::GOAWAY {
            assert_eq!(frames::goaway_code(&f), 0, "NO_ERROR: a graceful GOAWAY");
            break;
        }
    }
    // The stream in flight finishes after GOAWAY.
    let data = frames::frame(frames::DATA, frames::END_STREAM, 1, &body);
    tls.write_all(&data).await.expect("body");
    let (mut status, mut answer) = (None, Vec::new());
    while let Some(f) = frames::next(&mut tls).await {
        match (f.kind, f.stream) {
            // `:status: 200` is entry 8 of HPACK's static table.
            (frames::HEADERS, 1) => status = f.payload.first().copied(),
            (frames::DATA, 1) => answer.extend(&f.payload),
            _ => {}
        }
        if f.stream == 1 && f.flags & frames::END_STREAM != 0 {
            break;
        }
    }
    assert_eq!(status, Some(0x88), "200");
    assert!(
        allowed(&answer, "in-flight"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

#[tokio::test]
async fn a_client_without_alpn_speaks_http_1_1() {
    let s = start(Limits::WEBHOOK, Drain::default()).await;
    for alpn in [&[][..], &[&b"http/1.1"[..]][..]] {
        let config = client_config(&s.ca, alpn);
        let mut conn = common::HttpsConn::connect(s.addr, config)
            .await
            .expect("TLS");
        let body = serde_json::to_vec(&common::valid_review("one-one")).expect("JSON");
        let response = conn.post_json(VALIDATE_PATH, &body).await.expect("answer");
        assert_eq!(response.status, 200);
        assert!(allowed(&response.body, "one-one"));
    }
}
