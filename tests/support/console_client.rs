//! A console client as the tests use one (`tests/console_e2e.rs`): a WebSocket with KubeVirt's
//! subprotocol through kube-apiserver, as a user from their kubeconfig, and what it reads.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kube::Client;
use kubevirt_operator::subresources::upstream::{self, Socket, UpstreamError};
use tokio_tungstenite::tungstenite::Message;

use super::Started;

const WAIT: Duration = Duration::from_secs(60);

/// A client of `user` from their kubeconfig, as a console client makes it: without kube's
/// default retries, which would retry a refused (429) open until a place comes free.
pub async fn user_client(env: &Started, user: &str) -> Client {
    let path = env
        .write_kubeconfig(env.user(user), None)
        .expect("kubeconfig");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("read kubeconfig");
    let options = kube::config::KubeConfigOptions::default();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("config");
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// Opens `path` as `client` (through kube-apiserver), as virtctl does: a WebSocket upgrade
/// offering `plain.kubevirt.io`.
pub async fn open(client: &Client, path: &str) -> Result<Socket, UpstreamError> {
    upstream::connect(client, path).await
}

/// The HTTP status a refused open was answered with.
pub fn refused_with(opened: Result<Socket, UpstreamError>) -> u16 {
    match opened {
        Err(UpstreamError::Refused { code, message }) => {
            eprintln!("refused: {code} {message}");
            code.as_u16()
        }
        Err(e) => panic!("not an answer: {e}"),
        Ok(_) => panic!("opened"),
    }
}

/// Sends `bytes` as one binary message and reads the next data message.
pub async fn round_trip(socket: &mut Socket, bytes: &[u8]) -> Vec<u8> {
    socket
        .send(Message::Binary(bytes.to_vec().into()))
        .await
        .expect("send");
    loop {
        let next = tokio::time::timeout(WAIT, socket.next()).await;
        match next.expect("an answer in time") {
            Some(Ok(Message::Binary(b))) => return b.to_vec(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            other => panic!("not the echo: {other:?}"),
        }
    }
}

/// The close frame's code and reason the session ends with (no data expected before it).
pub async fn closed(socket: &mut Socket, within: Duration) -> (u16, String) {
    loop {
        let next = tokio::time::timeout(within, socket.next()).await;
        match next.expect("closed in time") {
            Some(Ok(Message::Close(Some(frame)))) => {
                return (u16::from(frame.code), frame.reason.to_string());
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            other => panic!("not a close frame: {other:?}"),
        }
    }
}

/// `GET /metrics` of the operator at `metrics`.
pub async fn scrape(metrics: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{metrics}/metrics"))
        .await
        .expect("/metrics")
        .text()
        .await
        .expect("body")
}

/// Keeps `socket` busy (a byte a second, so no idle timeout) until it is closed; the close
/// frame's code and reason.
pub async fn closed_while_busy(socket: &mut Socket) -> (u16, String) {
    tokio::time::timeout(WAIT, async {
        loop {
            socket
                .send(Message::Binary(b"x".to_vec().into()))
                .await
                .expect("send");
            match tokio::time::timeout(Duration::from_secs(1), socket.next()).await {
                Ok(Some(Ok(Message::Close(Some(frame))))) => {
                    return (u16::from(frame.code), frame.reason.to_string());
                }
                Ok(Some(Ok(_))) | Err(_) => continue,
                other => panic!("not a close frame: {other:?}"),
            }
        }
    })
    .await
    .expect("closed in time")
}
