//! The HTTPS server: TLS 1.2+ with the swappable certificate, HTTP/1.1 keep-alive, bounded time
//! for slow clients, a plain 400 for plain-HTTP clients, and graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use super::deadlines::{Deadlines, IDLE_TIMEOUT, REQUEST_TIMEOUT};
use super::resolver::CertSlot;

/// Time a client has to finish the TLS handshake (requests have theirs in [`super::deadlines`]).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight requests may take to finish once shutdown starts.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(25);

const TLS_HANDSHAKE_RECORD: u8 = 0x16;
const PLAIN_HTTP_REPLY: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// rustls server configuration: certificate from `slot` per handshake, HTTP/1.1 only.
pub fn server_config(slot: Arc<CertSlot>) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
    .with_no_client_auth()
    .with_cert_resolver(slot);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then drains connections.
pub async fn serve(
    listener: TcpListener,
    slot: Arc<CertSlot>,
    app: Router,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), rustls::Error> {
    let acceptor = TlsAcceptor::from(server_config(slot)?);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and similar: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let Some(tls) = handshake(&acceptor, tcp, peer).await else {
                return;
            };
            let service = TowerToHyperService::new(app);
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(None)
                .keep_alive(true);
            let io = Deadlines::new(tls, REQUEST_TIMEOUT, IDLE_TIMEOUT);
            let conn = builder.serve_connection(TokioIo::new(io), service);
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "in-flight admission requests did not finish within the shutdown grace period"
        );
    }
    Ok(())
}

async fn handshake(
    acceptor: &TlsAcceptor,
    mut tcp: TcpStream,
    peer: SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let mut first = [0u8; 1];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tcp.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {}
        Ok(Ok(1)) => {
            tracing::debug!(%peer, "plain HTTP on the TLS port");
            let _ = tcp.write_all(PLAIN_HTTP_REPLY).await;
            let _ = tcp.shutdown().await;
            return None;
        }
        _ => return None,
    }
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
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
