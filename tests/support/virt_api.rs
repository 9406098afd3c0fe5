//! KubeVirt's subresource API (`subresources.kubevirt.io/v1`, virt-api's) played on a test
//! control plane: an HTTPS server on loopback registered as its APIService, answering the power
//! subresources of any VMI, and a VM's stop, with 200, and a VMI's `console` and `vnc` as
//! virt-api does (a WebSocket upgrade, subprotocol `plain.kubevirt.io`) with a guest that echoes
//! every message; each call is recorded (who kube-apiserver said made it, and its body).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use futures::{SinkExt, StreamExt};
use kube::Client;

use super::aggregation::register_api_service;

const GROUP: &str = "subresources.kubevirt.io";
const VERSION: &str = "v1";

/// One call kube-apiserver proxied to the played virt-api.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// `namespace/vmi/subresource` (of a VM: `virtualmachines/namespace/vm/subresource`).
    pub target: String,
    /// X-Remote-User: who kube-apiserver authenticated.
    pub user: String,
    /// The request body as sent.
    pub body: String,
}

pub struct PlayedVirtApi {
    calls: Arc<Mutex<Vec<Call>>>,
    server: tokio::task::JoinHandle<()>,
}

impl PlayedVirtApi {
    /// Serves and registers it on the control plane of `admin`, as Service `service` of
    /// `namespace` (which must exist); returns once kube-apiserver proxies to it.
    pub async fn start(admin: &Client, namespace: &str, service: &str) -> PlayedVirtApi {
        let host = format!("{service}.{namespace}.svc");
        let cert = rcgen::generate_simple_self_signed(vec![host, "127.0.0.1".to_owned()])
            .expect("virt-api certificate");
        let slot = kubevirt_operator::tls::CertSlot::new();
        slot.store(
            kubevirt_operator::tls::keypair::certified_key(
                cert.cert.pem().as_bytes(),
                cert.signing_key.serialize_pem().as_bytes(),
            )
            .expect("virt-api key pair"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind virt-api");
        let port = listener.local_addr().expect("address").port();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route(&format!("/apis/{GROUP}/{VERSION}"), get(discovery))
            .route(
                &format!(
                    "/apis/{GROUP}/{VERSION}/namespaces/{{ns}}/virtualmachineinstances/{{vmi}}/{{sub}}"
                ),
                put(record).get(stream),
            )
            .route(
                &format!(
                    "/apis/{GROUP}/{VERSION}/namespaces/{{ns}}/virtualmachines/{{vm}}/{{sub}}"
                ),
                put(record_vm),
            )
            .with_state(calls.clone());
        let server = tokio::spawn(async move {
            let never = std::future::pending::<()>();
            let _ = kubevirt_operator::tls::server::serve(listener, slot, app, never).await;
        });
        register_api_service(
            admin,
            (GROUP, VERSION),
            (namespace, service),
            port,
            &cert.cert.pem(),
        )
        .await
        .expect("virt-api APIService");
        PlayedVirtApi { calls, server }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Drop for PlayedVirtApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn discovery() -> axum::Json<serde_json::Value> {
    let power = ["pause", "unpause", "softreboot"].map(|sub| (sub, "update"));
    let streams = ["console", "vnc"].map(|sub| (sub, "get"));
    let resources: Vec<serde_json::Value> = (power.iter().chain(streams.iter()))
        .map(|(sub, verb)| {
            serde_json::json!({
                "name": format!("virtualmachineinstances/{sub}"),
                "singularName": "", "namespaced": true,
                "kind": "VirtualMachineInstance", "verbs": [verb],
            })
        })
        .chain(std::iter::once(serde_json::json!({
            "name": "virtualmachines/stop",
            "singularName": "", "namespaced": true,
            "kind": "VirtualMachine", "verbs": ["update"],
        })))
        .collect();
    axum::Json(serde_json::json!({
        "kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"), "resources": resources,
    }))
}

async fn record(
    State(calls): State<Arc<Mutex<Vec<Call>>>>,
    Path((ns, vmi, sub)): Path<(String, String, String)>,
    request: Request,
) -> StatusCode {
    recorded(&calls, format!("{ns}/{vmi}/{sub}"), request).await
}

async fn record_vm(
    State(calls): State<Arc<Mutex<Vec<Call>>>>,
    Path((ns, vm, sub)): Path<(String, String, String)>,
    request: Request,
) -> StatusCode {
    recorded(&calls, format!("virtualmachines/{ns}/{vm}/{sub}"), request).await
}

/// A PUT recorded with its body, answered 200.
async fn recorded(calls: &Mutex<Vec<Call>>, target: String, request: Request) -> StatusCode {
    let user = user_of(&request);
    let body = axum::body::to_bytes(request.into_body(), 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    push(calls, Call { target, user, body });
    StatusCode::OK
}

fn user_of(request: &Request) -> String {
    request
        .headers()
        .get("x-remote-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

fn push(calls: &Mutex<Vec<Call>>, call: Call) {
    if let Ok(mut calls) = calls.lock() {
        calls.push(call);
    }
}

/// KubeVirt's subprotocol for console and VNC.
pub const PLAIN: &str = "plain.kubevirt.io";

/// `console` or `vnc` as virt-api serves them: only a WebSocket upgrade offering
/// `plain.kubevirt.io`; the guest echoes every message back as it came.
async fn stream(
    State(calls): State<Arc<Mutex<Vec<Call>>>>,
    Path((ns, vmi, sub)): Path<(String, String, String)>,
    mut request: Request,
) -> Response {
    let headers = request.headers();
    let offered = headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|p| p.trim() == PLAIN));
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let on_upgrade = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>();
    let (Some(key), Some(on_upgrade), true, true) = (
        key,
        on_upgrade,
        offered,
        ["console", "vnc"].contains(&sub.as_str()),
    ) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let target = format!("{ns}/{vmi}/{sub}");
    let user = user_of(&request);
    push(
        &calls,
        Call {
            target,
            user,
            body: String::new(),
        },
    );
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let mut socket = tokio_tungstenite::WebSocketStream::from_raw_socket(
            hyper_util::rt::TokioIo::new(upgraded),
            tokio_tungstenite::tungstenite::protocol::Role::Server,
            None,
        )
        .await;
        while let Some(Ok(message)) = socket.next().await {
            if message.is_binary() || message.is_text() {
                if socket.send(message).await.is_err() {
                    break;
                }
            } else if message.is_close() {
                break;
            }
        }
    });
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(PLAIN),
    );
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}
