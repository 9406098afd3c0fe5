//! The console's plumbing against an in-process WebSocket server on loopback that speaks
//! KubeVirt's console protocol: the upgrade through kube's client, the subprotocol, binary
//! frames both ways, the escape key, and the ends of a session.

use std::net::SocketAddr;

use futures::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::*;
use crate::plugin::connect::{PLAIN_PROTOCOL, PluginError, open_stream};

const PATH: &str = "/apis/subresources.vitistack.io/v1alpha1/namespaces/a/machines/vm-1/console";

#[derive(Clone, Copy)]
enum Server {
    /// Echoes every frame, and closes when the client does.
    Echo,
    /// Sends a greeting, then closes with a reason.
    Closes,
    /// Refuses the upgrade with a Status, as kube-apiserver's authorizer does.
    Forbids,
}

/// The server on a free loopback port, and what it received (one entry per binary frame).
async fn server(kind: Server) -> (SocketAddr, mpsc::UnboundedReceiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (seen, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        // The shape of tungstenite's callback, large error and all.
        #[allow(clippy::result_large_err)]
        let check = move |request: &Request, mut response: Response| {
            if matches!(kind, Server::Forbids) {
                let status = serde_json::json!({"kind": "Status", "apiVersion": "v1",
                    "status": "Failure", "reason": "Forbidden", "code": 403,
                    "message": "User \"bob\" cannot get resource \"machines/console\""});
                let mut refusal = ErrorResponse::new(Some(status.to_string()));
                *refusal.status_mut() = http::StatusCode::FORBIDDEN;
                return Err(refusal);
            }
            assert_eq!(request.uri().path(), PATH);
            let protocol = request.headers().get("sec-websocket-protocol").cloned();
            assert_eq!(
                protocol.as_ref().map(|p| p.as_bytes()),
                Some(PLAIN_PROTOCOL.as_bytes())
            );
            if let Some(p) = protocol {
                response.headers_mut().insert("sec-websocket-protocol", p);
            }
            Ok(response)
        };
        let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, check).await else {
            return;
        };
        if let Server::Closes = kind {
            let _ = ws.send(Message::binary(b"login: ".to_vec())).await;
            let frame = CloseFrame {
                code: CloseCode::Policy,
                reason: "idle timeout".into(),
            };
            let _ = ws.send(Message::Close(Some(frame))).await;
        }
        while let Some(Ok(frame)) = ws.next().await {
            if let Message::Binary(data) = frame {
                let _ = seen.send(data.to_vec());
                let _ = ws.send(Message::Binary(data)).await;
            }
        }
    });
    (addr, received)
}

fn client(addr: SocketAddr) -> kube::Client {
    crate::tls::install_crypto_provider();
    let url = format!("http://{addr}").parse().expect("url");
    kube::Client::try_from(kube::Config::new(url)).expect("client")
}

fn drain(received: &mut mpsc::UnboundedReceiver<Vec<u8>>) -> Vec<u8> {
    let mut all = Vec::new();
    while let Ok(chunk) = received.try_recv() {
        all.extend(chunk);
    }
    all
}

#[tokio::test]
async fn piped_input_round_trips_and_ends_with_the_servers_close() {
    let (addr, mut received) = server(Server::Echo).await;
    let mut ws = open_stream(&client(addr), PATH, "console")
        .await
        .expect("upgraded");
    let input: &[u8] = b"root\r\n\x1d\x00\xffbinary-safe";
    let mut output = Vec::new();
    // Piped: no escape key, every byte is the guest's.
    let end = pump(&mut ws, input, &mut output, false)
        .await
        .expect("pumped");
    assert_eq!(end, End::LocalEnded);
    assert_eq!(output, input, "echoed back before the close");
    assert_eq!(drain(&mut received), input);
}

#[tokio::test]
async fn the_escape_key_leaves_and_nothing_after_it_is_sent() {
    let (addr, mut received) = server(Server::Echo).await;
    let mut ws = open_stream(&client(addr), PATH, "console")
        .await
        .expect("upgraded");
    // A terminal: the input stays open, so only the escape key ends the session.
    let (mut keyboard, input) = tokio::io::duplex(64);
    tokio::io::AsyncWriteExt::write_all(&mut keyboard, b"ls\r")
        .await
        .expect("typed");
    let mut output = Vec::new();
    let session = tokio::spawn(async move {
        let end = pump(&mut ws, input, &mut output, true).await;
        (end.map_err(|e| e.to_string()), output)
    });
    let first = received.recv().await.expect("the typed line");
    assert_eq!(first, b"ls\r");
    tokio::io::AsyncWriteExt::write_all(&mut keyboard, b"x\x1dreboot\r")
        .await
        .expect("typed");
    let (end, _) = session.await.expect("session");
    assert_eq!(end, Ok(End::Escaped));
    let rest = tokio::time::timeout(std::time::Duration::from_secs(5), received.recv())
        .await
        .expect("the server hears the rest or the close");
    assert_eq!(rest.as_deref(), Some(&b"x"[..]), "what preceded the key");
    assert_eq!(received.recv().await, None, "then the close, nothing after");
}

#[tokio::test]
async fn the_servers_close_ends_the_session_with_its_reason() {
    let (addr, _received) = server(Server::Closes).await;
    let mut ws = open_stream(&client(addr), PATH, "console")
        .await
        .expect("upgraded");
    let (_keyboard, input) = tokio::io::duplex(64);
    let mut output = Vec::new();
    let end = pump(&mut ws, input, &mut output, true)
        .await
        .expect("pumped");
    assert_eq!(end, End::ServerClosed(Some("idle timeout".to_owned())));
    assert_eq!(output, b"login: ");
}

#[tokio::test]
async fn a_refused_upgrade_passes_the_apis_message_on() {
    let (addr, _received) = server(Server::Forbids).await;
    let refused = open_stream(&client(addr), PATH, "console").await;
    match refused {
        Err(PluginError::Refused(message)) => assert!(
            message.starts_with("Error from server (Forbidden): User \"bob\" cannot get"),
            "{message}"
        ),
        Err(e) => panic!("refused otherwise: {e}"),
        Ok(_) => panic!("upgraded"),
    }
}
