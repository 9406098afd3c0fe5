//! The HTTPS server: TLS 1.2+ with the swappable certificate, HTTP/2 or HTTP/1.1 keep-alive
//! as the client's ALPN chooses (HTTP/1.1 without ALPN), a plain 400
//! for plain-HTTP clients; limits and the stop sequence are [`super::listener`]'s.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use super::client_auth::ClientCa;
use super::listener::{self, Drain, Limits, RefusedConnections};
use super::resolver::CertSlot;

/// Time a client has to finish the TLS handshake (requests have theirs in [`super::deadlines`]).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

const TLS_HANDSHAKE_RECORD: u8 = 0x16;
const PLAIN_HTTP_REPLY: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// rustls server configuration: certificate from `slot` per handshake, ALPN `h2` preferred over
/// `http/1.1` (a client offering neither, or no ALPN, gets HTTP/1.1), and
/// callers' certificates verified against `client_ca` when given.
pub fn server_config(
    slot: Arc<CertSlot>,
    client_ca: Option<&ClientCa>,
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let builder = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match client_ca {
        Some(ca) => builder.with_client_cert_verifier(ca.0.clone()),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(slot);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `app` over TLS on `listener` with the webhook limits until `shutdown` resolves, then
/// lets in-flight requests finish (no drain: see [`serve_with`]).
pub async fn serve(
    listener: TcpListener,
    slot: Arc<CertSlot>,
    app: Router,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), rustls::Error> {
    serve_with(
        listener,
        slot,
        app,
        shutdown,
        Limits::WEBHOOK,
        Drain::default(),
        RefusedConnections::default(),
    )
    .await
}

/// Serves `app` over TLS on `listener` within `limits`; once `shutdown` resolves, answers on for
/// the drain period, then closes (see [`super::listener`]). Refusals are counted in `refused`.
pub async fn serve_with(
    listener: TcpListener,
    slot: Arc<CertSlot>,
    app: Router,
    shutdown: impl std::future::Future<Output = ()>,
    limits: Limits,
    drain: Drain,
    refused: RefusedConnections,
) -> Result<(), rustls::Error> {
    serve_authenticated(listener, slot, None, app, shutdown, limits, drain, refused).await
}

/// [`serve_with`], and only callers whose certificate `client_ca` verifies complete the
/// handshake (`--client-ca-file`); `None`: any caller.
#[allow(clippy::too_many_arguments)] // The listener's parts, each passed once from `run`.
pub async fn serve_authenticated(
    listener: TcpListener,
    slot: Arc<CertSlot>,
    client_ca: Option<ClientCa>,
    app: Router,
    shutdown: impl std::future::Future<Output = ()>,
    limits: Limits,
    drain: Drain,
    refused: RefusedConnections,
) -> Result<(), rustls::Error> {
    let acceptor = TlsAcceptor::from(server_config(slot, client_ca.as_ref())?);
    let handshake = move |tcp, peer| {
        let acceptor = acceptor.clone();
        async move { handshake(&acceptor, tcp, peer).await }
    };
    listener::serve(listener, limits, app, shutdown, drain, refused, handshake).await;
    Ok(())
}

async fn handshake(
    acceptor: &TlsAcceptor,
    mut tcp: TcpStream,
    peer: SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    // One deadline for the first byte and the handshake together.
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    let mut first = [0u8; 1];
    match tokio::time::timeout_at(deadline, tcp.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {}
        Ok(Ok(1)) => {
            tracing::debug!(%peer, "plain HTTP on the TLS port");
            let _ = tcp.write_all(PLAIN_HTTP_REPLY).await;
            let _ = tcp.shutdown().await;
            return None;
        }
        _ => return None,
    }
    match tokio::time::timeout_at(deadline, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}
