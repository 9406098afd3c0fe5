//! The plugin's I/O with kube-apiserver: the user's client from their kubeconfig, a button
//! pressed, a WebSocket stream opened; and how the API's refusals are worded (pure).

use std::path::Path;

use axum::http::header::{
    CONNECTION, CONTENT_TYPE, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL,
    SEC_WEBSOCKET_VERSION, UPGRADE,
};
use axum::http::{Method, StatusCode};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use kube::Client;
use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::call::Press;
use super::pump::PumpError;

/// KubeVirt's console and VNC subprotocol: the stream's bytes in binary frames.
pub const PLAIN_PROTOCOL: &str = "plain.kubevirt.io";

/// A console or VNC stream, upgraded through kube-apiserver.
pub type MachineStream = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("{0}")]
    Kubeconfig(String),
    /// kube-apiserver's (or the operator's) refusal, worded by [`refusal`].
    #[error("{0}")]
    Refused(String),
    #[error("cannot reach the API server: {0}")]
    Transport(String),
    #[error("the stream was not opened: {0}")]
    Upgrade(String),
    #[error(transparent)]
    Stream(#[from] PumpError),
    #[error("{0}")]
    Local(String),
}

/// The user's client, as kubectl would make it (`--kubeconfig`, else `KUBECONFIG`, else
/// `~/.kube/config`; `--context`, else the current one), and the context's namespace.
pub async fn user_client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<(Client, String), PluginError> {
    let loaded = match kubeconfig {
        Some(path) => Kubeconfig::read_from(path)
            .map_err(|e| PluginError::Kubeconfig(format!("{}: {e}", path.display())))?,
        None => Kubeconfig::read().map_err(|e| {
            PluginError::Kubeconfig(format!("kubeconfig (KUBECONFIG or ~/.kube/config): {e}"))
        })?,
    };
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(loaded, &options)
        .await
        .map_err(|e| PluginError::Kubeconfig(format!("kubeconfig: {e}")))?;
    // A button is pressed once: a retry after a 504 (KubeVirt slow to answer) could reboot
    // twice, and the user would rather hear the 503 or 504 at once, as kubectl tells it.
    config.default_retry = false;
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| PluginError::Kubeconfig(e.to_string()))?;
    Ok((client, namespace))
}

/// PUTs `press`; kube-apiserver's refusal, or the operator's, is worded by [`refusal`].
pub async fn press(client: &Client, press: &Press) -> Result<(), PluginError> {
    let request = axum::http::Request::builder()
        .method(Method::PUT)
        .uri(&press.path)
        .header(CONTENT_TYPE, "application/json")
        .body(press.body.clone().into_bytes())
        .map_err(|e| PluginError::Local(e.to_string()))?;
    match client.request_text(request).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(PluginError::Refused(refusal(
            status.code,
            &status.reason,
            &status.message,
            press.subresource,
        ))),
        Err(e) => Err(PluginError::Transport(e.to_string())),
    }
}

/// Opens the WebSocket of `path` (a GET with upgrade, through kube-apiserver with the user's
/// credentials) in KubeVirt's subprotocol. kube's `Client::connect` would offer only the
/// channel.k8s.io subprotocols of exec/attach, which KubeVirt's console does not speak, so the
/// upgrade is asked for here on kube's own client (its TLS, auth and proxy).
pub async fn open_stream(
    client: &Client,
    path: &str,
    subresource: &str,
) -> Result<MachineStream, PluginError> {
    let key = generate_key();
    let request = axum::http::Request::get(path)
        .header(CONNECTION, "Upgrade")
        .header(UPGRADE, "websocket")
        .header(SEC_WEBSOCKET_VERSION, "13")
        .header(SEC_WEBSOCKET_KEY, &key)
        .header(SEC_WEBSOCKET_PROTOCOL, PLAIN_PROTOCOL)
        .body(Body::from(Vec::new()))
        .map_err(|e| PluginError::Local(e.to_string()))?;
    let response = client
        .send(request)
        .await
        .map_err(|e| PluginError::Transport(e.to_string()))?;
    let code = response.status();
    if code != StatusCode::SWITCHING_PROTOCOLS {
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let status: kube::core::Status = serde_json::from_slice(&body).unwrap_or_default();
        let message = if status.message.is_empty() {
            String::from_utf8_lossy(&body).trim().to_owned()
        } else {
            status.message
        };
        return Err(PluginError::Refused(refusal(
            code.as_u16(),
            &status.reason,
            &message,
            subresource,
        )));
    }
    let headers = response.headers();
    if headers.get(SEC_WEBSOCKET_ACCEPT).map(|v| v.as_bytes())
        != Some(derive_accept_key(key.as_bytes()).as_bytes())
    {
        return Err(PluginError::Upgrade(
            "the server's Sec-WebSocket-Accept does not answer our key".to_owned(),
        ));
    }
    // KubeVirt answers with the subprotocol asked for; another one would not be its bytes.
    if let Some(other) = headers
        .get(SEC_WEBSOCKET_PROTOCOL)
        .filter(|p| p.as_bytes() != PLAIN_PROTOCOL.as_bytes())
    {
        return Err(PluginError::Upgrade(format!(
            "the server chose the subprotocol {other:?}, not {PLAIN_PROTOCOL}"
        )));
    }
    let upgraded = hyper::upgrade::on(response)
        .await
        .map_err(|e| PluginError::Upgrade(e.to_string()))?;
    Ok(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, None).await)
}

/// kube-apiserver's generic 404 for a path no API serves.
const NOT_FOUND_GENERIC: &str = "the server could not find the requested resource";

/// How a refusal is told, as kubectl tells it (`Error from server (Reason): message`), with a
/// hint where the API's own words would leave the user guessing: a path this cluster does not
/// serve (no aggregated API, or one without the subresource), or an aggregated API that does
/// not answer.
pub fn refusal(code: u16, reason: &str, message: &str, subresource: &str) -> String {
    let reason = if reason.is_empty() {
        StatusCode::from_u16(code)
            .ok()
            .and_then(|c| c.canonical_reason())
            .unwrap_or("Error")
            .replace(' ', "")
    } else {
        reason.to_owned()
    };
    let message = if message.is_empty() {
        format!("HTTP {code}")
    } else {
        message.to_owned()
    };
    let hint = match code {
        404 if message.starts_with(NOT_FOUND_GENERIC) || message.contains("is not served") => {
            format!(
                " (machines/{subresource} is not served by this cluster: the operator's \
                 aggregated API subresources.vitistack.io/v1alpha1 is not installed, or is \
                 older than this plugin)"
            )
        }
        503 if !message.contains("KubeVirt") && !message.contains("KubevirtConfig") => {
            " (the operator's aggregated API subresources.vitistack.io does not answer: is \
             the operator running, and its APIService Available?)"
                .to_owned()
        }
        _ => String::new(),
    };
    format!("Error from server ({reason}): {message}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_pass_the_apis_message_on_with_a_hint_where_it_helps() {
        let forbidden = "machines.subresources.vitistack.io \"vm-1\" is forbidden: User \"bob\" \
                         cannot update resource \"machines/pause\" in API group \
                         \"subresources.vitistack.io\" in the namespace \"team-a\"";
        let cases = [
            (
                403,
                "Forbidden",
                forbidden,
                "Error from server (Forbidden): machines.",
                "machines/pause\" in API group",
            ),
            (
                404,
                "NotFound",
                "Machine team-a/ghost not found",
                "Error from server (NotFound): Machine team-a/ghost not found",
                "",
            ),
            (
                404,
                "NotFound",
                NOT_FOUND_GENERIC,
                "not served by this cluster",
                "machines/pause",
            ),
            (
                404,
                "NotFound",
                "machines/pause is not served (yet)",
                "is not served (yet) (machines/pause is not served by this cluster",
                "",
            ),
            (
                409,
                "Conflict",
                "KubeVirt on dc1: VMI is already paused",
                "(Conflict): KubeVirt on dc1: VMI is already paused",
                "",
            ),
            (
                503,
                "ServiceUnavailable",
                "service unavailable",
                "does not answer",
                "",
            ),
            (
                503,
                "ServiceUnavailable",
                "the Machine's cluster (KubevirtConfig dc1) is not ready: x",
                "not ready: x",
                "",
            ),
            (502, "", "", "Error from server (BadGateway): HTTP 502", ""),
        ];
        for (code, reason, message, want, also) in cases {
            let got = refusal(code, reason, message, "pause");
            assert!(
                got.contains(want) && got.contains(also),
                "{code} {message}: {got}"
            );
        }
        let kubevirts_own = refusal(
            503,
            "ServiceUnavailable",
            "the Machine's cluster (KubevirtConfig dc1) is not ready: x",
            "pause",
        );
        assert!(
            !kubevirts_own.contains("does not answer"),
            "{kubevirts_own}"
        );
        assert!(!refusal(404, "NotFound", "Machine a/b not found", "pause").contains("not served"));
    }
}
