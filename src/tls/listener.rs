//! The accept loop every listener shares (webhooks over TLS, metrics and probes over plain
//! HTTP): a cap on open connections, the request and idle deadlines of [`super::deadlines`], and
//! the stop sequence of a rollout.
//!
//! Stop sequence: when `shutdown` resolves, [`Draining`] turns on at once (`/readyz` fails, so
//! the endpoints drop this pod), yet the listener keeps accepting and answering for the drain
//! period, every answer carrying `Connection: close` so clients move to another replica
//! without a race; then it stops accepting, closes idle connections and lets in-flight requests
//! finish (bounded by the request deadline).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::deadlines::Deadlines;

/// Per-listener bounds. A connection beyond `max_connections` waits in the kernel's backlog
/// until one closes (as Go's `netutil.LimitListener` does), so a flood never grows our memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    /// Time for a new connection's first request, and for each request once its first byte
    /// arrived, to be read and answered (headers included: slow headers are cut here).
    pub request_timeout: Duration,
    /// Time a keep-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
}

impl Limits {
    /// kube-apiserver keeps idle webhook connections for 90 s: ours outlive them (the client
    /// always closes first). 256 connections at ~40 KiB of TLS and HTTP buffers each stay near
    /// 10 MiB.
    pub const WEBHOOK: Limits = Limits {
        max_connections: 256,
        request_timeout: super::deadlines::REQUEST_TIMEOUT,
        idle_timeout: super::deadlines::IDLE_TIMEOUT,
    };
    /// The kubelet probes on a fresh connection each time, within its 1 s default timeout.
    pub const PROBES: Limits = Limits {
        max_connections: 32,
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
    };
    /// Prometheus keeps its connection between scrapes (15-60 s apart).
    pub const METRICS: Limits = Limits {
        max_connections: 32,
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(120),
    };
}

/// Whether the process is shutting down (and its listeners draining).
#[derive(Clone, Debug, Default)]
pub struct Draining(Arc<AtomicBool>);

impl Draining {
    pub fn begin(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// A readiness check: holds until draining begins.
    pub fn not_draining(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let draining = self.clone();
        move || !draining.is_draining()
    }
}

/// How a listener ends: once shutdown is asked for, `draining` begins and lasts `period`.
#[derive(Clone, Debug, Default)]
pub struct Drain {
    pub period: Duration,
    pub draining: Draining,
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves and the drain after it
/// ends; `accept` turns each TCP connection into the stream HTTP runs on (a TLS handshake, or
/// the connection itself), None to drop it.
pub async fn serve<IO, A, AF>(
    listener: TcpListener,
    limits: Limits,
    app: Router,
    shutdown: impl Future<Output = ()>,
    drain: Drain,
    accept: A,
) where
    A: Fn(TcpStream, SocketAddr) -> AF + Clone + Send + 'static,
    AF: Future<Output = Option<IO>> + Send,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let draining = drain.draining.clone();
    let app = app.layer(axum::middleware::map_response(move |response| {
        let draining = draining.clone();
        async move { close_when_draining(response, &draining) }
    }));
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let stop_accepting = async {
        shutdown.await;
        drain.draining.begin();
        tracing::info!(period = ?drain.period, "draining: still answering, then closing");
        tokio::time::sleep(drain.period).await;
    };
    tokio::pin!(stop_accepting);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut stop_accepting => break,
        };
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
            () = &mut stop_accepting => break,
        };
        let _ = tcp.set_nodelay(true);
        let (accept, app, watcher) = (accept.clone(), app.clone(), graceful.watcher());
        tokio::spawn(async move {
            let _slot = slot;
            let Some(io) = accept(tcp, peer).await else {
                return;
            };
            let mut builder = hyper::server::conn::http1::Builder::new();
            // hyper's header timeout also runs while a keep-alive connection idles; the
            // deadlines below cover headers without that.
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(None)
                .keep_alive(true);
            let io = Deadlines::new(io, limits.request_timeout, limits.idle_timeout);
            let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(app));
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    // In-flight requests are bounded by the request deadline; a second covers the last write.
    let grace = limits.request_timeout + Duration::from_secs(1);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests did not finish within the request deadline");
    }
}

fn close_when_draining(mut response: Response, draining: &Draining) -> Response {
    if draining.is_draining() {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each listener's bounds, as docs/admission.md and the README give them (the rules
    /// themselves are `tests/listener_limits.rs`'s, the webhook's in production
    /// `tests/webhook_bad_input.rs`'s).
    #[test]
    fn production_limits_are_the_documented_values() {
        let secs = Duration::from_secs;
        let bounds = |l: Limits| (l.max_connections, l.request_timeout, l.idle_timeout);
        assert_eq!(bounds(Limits::WEBHOOK), (256, secs(10), secs(120)));
        assert_eq!(bounds(Limits::METRICS), (32, secs(10), secs(120)));
        assert_eq!(bounds(Limits::PROBES), (32, secs(5), secs(5)));
        assert_eq!(super::super::server::HANDSHAKE_TIMEOUT, secs(10));
    }
}
