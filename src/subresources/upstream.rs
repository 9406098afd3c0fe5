//! KubeVirt's side of a session: a WebSocket to `virtualmachineinstances/<vmi>/console|vnc`
//! through the operator's client of the VMI's cluster, with KubeVirt's subprotocol.
//!
//! Hand-written over `kube::Client::send` because kube's own `connect` offers only the
//! `channel.k8s.io` subprotocols (exec/attach), which virt-api does not speak.

use axum::http::{StatusCode, header};
use hyper_util::rt::TokioIo;
use kube::Client;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::{client::generate_key, derive_accept_key};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::power::Target;
use super::sessions::Kind;

/// KubeVirt's subprotocol for console and VNC (virtctl's and virt-api's): the stream's bytes
/// as they are, in binary messages.
pub const PROTOCOL: &str = "plain.kubevirt.io";

/// A WebSocket over an upgraded HTTP/1.1 connection, either side.
pub type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// The bound on one message and one frame, either way, and on what waits to be written: a
/// serial console sends a line at a time and VNC a screen update (virt-api's buffers are 10 KiB).
pub fn config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(1 << 20))
        .max_frame_size(Some(1 << 20))
        .max_write_buffer_size(4 << 20)
}

/// Why KubeVirt's side could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// KubeVirt (or the cluster's kube-apiserver) answered without upgrading.
    #[error("{message}")]
    Refused { code: StatusCode, message: String },
    #[error("{0}")]
    Transport(String),
}

/// KubeVirt's path for `kind` on `target`.
pub fn kubevirt_path(kind: Kind, target: &Target) -> String {
    format!(
        "/apis/subresources.kubevirt.io/v1/namespaces/{}/virtualmachineinstances/{}/{}",
        target.namespace,
        target.vmi,
        kind.as_str()
    )
}

/// Opens KubeVirt's side of a session at `path` with `client`.
pub async fn connect(client: &Client, path: &str) -> Result<Socket, UpstreamError> {
    let key = generate_key();
    let request = axum::http::Request::get(path)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_VERSION, "13")
        .header(header::SEC_WEBSOCKET_KEY, &key)
        .header(header::SEC_WEBSOCKET_PROTOCOL, PROTOCOL)
        .body(kube::client::Body::empty())
        .map_err(|e| UpstreamError::Transport(e.to_string()))?;
    let response = client
        .send(request)
        .await
        .map_err(|e| UpstreamError::Transport(e.to_string()))?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        let code = response.status();
        let body = response.into_body().collect_bytes().await;
        let text = body.map(|b| String::from_utf8_lossy(&b).into_owned());
        return Err(UpstreamError::Refused {
            code,
            message: status_message(&text.unwrap_or_default(), code),
        });
    }
    let accept = response.headers().get(header::SEC_WEBSOCKET_ACCEPT);
    if accept.map(|a| a.as_bytes()) != Some(derive_accept_key(key.as_bytes()).as_bytes()) {
        return Err(UpstreamError::Transport(
            "the upgrade's Sec-WebSocket-Accept does not match".to_owned(),
        ));
    }
    let upgraded = hyper::upgrade::on(response)
        .await
        .map_err(|e| UpstreamError::Transport(e.to_string()))?;
    Ok(
        WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, Some(config()))
            .await,
    )
}

/// The message of a Kubernetes Status body, else the body itself (cut short), else the code.
fn status_message(body: &str, code: StatusCode) -> String {
    let status: Option<serde_json::Value> = serde_json::from_str(body).ok();
    match status.as_ref().and_then(|s| s["message"].as_str()) {
        Some(message) => message.to_owned(),
        None if !body.trim().is_empty() => body.trim().chars().take(200).collect(),
        None => code.to_string(),
    }
}

#[cfg(test)]
#[test]
fn kubevirts_answer_is_named_by_its_message() {
    let status = r#"{"kind":"Status","message":"VMI is not running","code":409}"#;
    assert_eq!(
        status_message(status, StatusCode::CONFLICT),
        "VMI is not running"
    );
    assert_eq!(
        status_message("plain words\n", StatusCode::BAD_REQUEST),
        "plain words"
    );
    assert_eq!(status_message("", StatusCode::NOT_FOUND), "404 Not Found");
}
