//! `GET .../machines/{name}/console|vnc` with `Upgrade: websocket`: the Machine's serial console
//! or VNC, relayed to KubeVirt's `virtualmachineinstances/<vmi>/console|vnc` on the VMI's
//! cluster with the operator's credentials, within the session limits ([`super::held`]).
//! Everything that can fail is checked before the user's upgrade is answered, so a refusal is a
//! Status with its code, as from KubeVirt.

use axum::extract::{Extension, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use kube::Api;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::answer::{Shared, authenticate, status, unauthorized};
use super::held::Held;
use super::pipe::{self, Session};
use super::relay::{RELAY_TIMEOUT, machine_target, unavailable};
use super::sessions;
use super::sessions::{Kind, Refusal};
use super::upstream::{self, PROTOCOL, UpstreamError};
use crate::api::Machine;

/// GET `.../namespaces/{namespace}/machines/{name}/{subresource}`.
pub async fn get(
    State(shared): State<Shared>,
    Extension(held): Extension<Held>,
    Path((namespace, name, subresource)): Path<(String, String, String)>,
    mut request: Request,
) -> Response {
    let user = match authenticate(&shared.verifier, request.headers()) {
        Ok(user) => user,
        Err(why) => return unauthorized(&why),
    };
    let Some(kind) = Kind::parse(&subresource) else {
        let message = format!("GET machines/{subresource} is not served (yet)");
        return status(StatusCode::NOT_FOUND, "NotFound", &message);
    };
    let Some(key) = websocket_key(request.headers()) else {
        let message = format!(
            "machines/{subresource} is a WebSocket stream: GET with Upgrade: websocket, Sec-WebSocket-Version: 13 and subprotocol {PROTOCOL}"
        );
        return status(StatusCode::BAD_REQUEST, "BadRequest", &message);
    };
    let protocol = match subprotocol(request.headers()) {
        Ok(protocol) => protocol,
        Err(offered) => {
            let message = format!("subprotocols {offered:?} offered; {PROTOCOL} is spoken");
            return status(StatusCode::BAD_REQUEST, "BadRequest", &message);
        }
    };
    let Some(on_upgrade) = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>()
    else {
        let message = "this connection cannot be upgraded (HTTP/1.1 only)";
        return status(StatusCode::BAD_REQUEST, "BadRequest", message);
    };
    let (_, target, cluster) = match machine_target(&shared, &namespace, &name).await {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let cluster_name = target
        .cluster
        .clone()
        .unwrap_or_else(|| "the operator's own cluster".to_owned());
    let ticket = match held.open(&user.name, kind) {
        Ok(ticket) => ticket,
        Err(refusal) => return refused(refusal),
    };
    let path = upstream::kubevirt_path(kind, &target);
    let opened = tokio::time::timeout(RELAY_TIMEOUT, async {
        let uid = pipe::vmi_uid(&cluster, &target).await;
        (upstream::connect(&cluster, &path).await, uid)
    })
    .await;
    let (kubevirt, vmi_uid) = match opened {
        Err(_) => {
            let message =
                format!("KubeVirt on {cluster_name} did not answer within {RELAY_TIMEOUT:?}");
            return status(StatusCode::GATEWAY_TIMEOUT, "Timeout", &message);
        }
        Ok((Err(UpstreamError::Refused { code, message }), _)) => {
            let message = format!("KubeVirt on {cluster_name}: {message}");
            return status(code, code.canonical_reason().unwrap_or("Error"), &message);
        }
        Ok((Err(e), _)) => return unavailable(&format!("KubeVirt on {cluster_name}: {e}")),
        Ok((Ok(kubevirt), uid)) => (kubevirt, uid.ok().flatten()),
    };
    let session = Session {
        ticket,
        limits: *held.limits(),
        draining: held.draining().clone(),
        machines: Api::<Machine>::namespaced(shared.client.clone(), &namespace),
        machine: name.clone(),
        cluster,
        target,
        vmi_uid,
    };
    tracing::info!(user = %user.name, machine = %name, %namespace, cluster = %cluster_name, kind = kind.as_str(), "session opened");
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            session.ticket.ended(sessions::End::ClientClosed);
            return;
        };
        let socket = WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Server,
            Some(upstream::config()),
        )
        .await;
        let started = std::time::Instant::now();
        let (end, relayed) = pipe::run(socket, kubevirt, &session).await;
        session.ticket.ended(end);
        tracing::info!(
            user = %user.name, machine = %name, %namespace, cluster = %cluster_name,
            kind = kind.as_str(), reason = end.as_str(), seconds = started.elapsed().as_secs(),
            bytes_from_user = relayed.from_user, bytes_to_user = relayed.to_user,
            "session ended"
        );
    });
    switching_protocols(&key, protocol)
}

fn refused(refusal: Refusal) -> Response {
    match refusal {
        Refusal::Draining => unavailable(&refusal.to_string()),
        _ => status(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            &refusal.to_string(),
        ),
    }
}

/// The key of a WebSocket upgrade request (RFC 6455 4.1), None if it is not one.
fn websocket_key(headers: &HeaderMap) -> Option<String> {
    let has = |name, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    let upgrade = has(header::CONNECTION, "upgrade") && has(header::UPGRADE, "websocket");
    let version = headers.get(header::SEC_WEBSOCKET_VERSION)? == "13";
    let key = headers.get(header::SEC_WEBSOCKET_KEY)?.to_str().ok()?;
    (upgrade && version && !key.is_empty()).then(|| key.to_owned())
}

/// KubeVirt's subprotocol when the client offers it; none when it offers none (as virt-api
/// answers); Err with the offer when it offers only others.
fn subprotocol(headers: &HeaderMap) -> Result<Option<&'static str>, String> {
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if offered.is_empty() {
        Ok(None)
    } else if offered.contains(&PROTOCOL) {
        Ok(Some(PROTOCOL))
    } else {
        Err(offered.join(", "))
    }
}

fn switching_protocols(key: &str, protocol: Option<&'static str>) -> Response {
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    if let Some(protocol) = protocol {
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(protocol),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn only_a_websocket_upgrade_with_kubevirts_subprotocol_is_taken() {
        let upgrade = [
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        assert_eq!(
            websocket_key(&headers(&upgrade)).as_deref(),
            Some("dGhlIHNhbXBsZSBub25jZQ==")
        );
        assert_eq!(
            websocket_key(&headers(&upgrade[1..])),
            None,
            "no Connection"
        );
        assert_eq!(websocket_key(&headers(&upgrade[..3])), None, "no key");
        let old = [
            upgrade[0],
            upgrade[1],
            ("sec-websocket-version", "8"),
            upgrade[3],
        ];
        assert_eq!(websocket_key(&headers(&old)), None, "version 13 only");

        let cases = [
            (vec![], Ok(None)),
            (
                vec![("sec-websocket-protocol", "plain.kubevirt.io")],
                Ok(Some(PROTOCOL)),
            ),
            (
                vec![(
                    "sec-websocket-protocol",
                    "base64.binary.k8s.io, plain.kubevirt.io",
                )],
                Ok(Some(PROTOCOL)),
            ),
            (
                vec![("sec-websocket-protocol", "v4.channel.k8s.io")],
                Err("v4.channel.k8s.io".to_owned()),
            ),
        ];
        for (given, want) in cases {
            assert_eq!(subprotocol(&headers(&given)), want, "{given:?}");
        }
    }
}
