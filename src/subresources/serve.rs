//! The aggregated API's listener: the operator's TLS server and limits, with the serving
//! certificate of the webhooks, and only the front proxy completing the handshake.

use std::sync::Arc;

use kube::Client;
use tokio::net::TcpListener;

use super::held::Held;
use super::routes;
use super::verifier::FrontProxyVerifier;
use super::{answer, observe};
use crate::clusters::Registry;
use crate::tls::CertSlot;
use crate::tls::client_auth::ClientCa;
use crate::tls::listener::{Drain, Limits, RefusedConnections};
use crate::tls::server;

/// The webhook listener's bounds (kube-apiserver is the one client of both), under its own name
/// in the refusal counter.
pub const LIMITS: Limits = Limits {
    name: "subresources",
    ..Limits::WEBHOOK
};

/// Time the console and VNC sessions have to close once the listener stopped (they close as
/// draining begins, with a close frame saying so).
pub const SESSIONS_CLOSE: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves the aggregated API on `listener` until `shutdown` and the drain after it, following
/// the front proxy's CA with `client`; power buttons act through `client` (the operator's own
/// cluster) or `registry` (remote ones); console and VNC sessions take their places in `held`.
#[allow(clippy::too_many_arguments)] // The listener's parts, each passed once from `run`.
pub async fn serve(
    listener: TcpListener,
    slot: Arc<CertSlot>,
    client: Client,
    registry: Registry,
    shutdown: impl std::future::Future<Output = ()>,
    drain: Drain,
    refused: RefusedConnections,
    held: Held,
) -> Result<(), rustls::Error> {
    let verifier = FrontProxyVerifier::new();
    let follower = tokio::spawn(observe::follow(client.clone(), verifier.clone()));
    let app = routes::router(
        answer::Shared {
            verifier: verifier.clone(),
            client,
            registry,
        },
        held.clone(),
    );
    let served = server::serve_authenticated(
        listener,
        slot,
        Some(ClientCa(verifier)),
        app,
        shutdown,
        LIMITS,
        drain,
        refused,
    )
    .await;
    follower.abort();
    if !held.closed(SESSIONS_CLOSE).await {
        tracing::warn!("console/VNC sessions did not close within {SESSIONS_CLOSE:?}");
    }
    served
}
