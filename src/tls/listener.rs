//! The accept loop every listener shares (webhooks over TLS, metrics and probes over plain
//! HTTP): caps on open connections, in all and per client address ([`super::admit`]), a bound on
//! what one connection serves, the request and idle deadlines of [`super::deadlines`], and the
//! stop sequence of a rollout.
//!
//! A connection beyond a cap is accepted and closed at once, counted in
//! `kubevirt_operator_listener_refused_total{listener,reason}` and logged at most every 10 s:
//! the client learns at once instead of waiting out its timeout in the kernel's backlog, and
//! one client holding its cap leaves the others their slots.
//!
//! Every request, over HTTP/1.1 or HTTP/2 (a TLS client that offers ALPN `h2`, see
//! [`super::h2`]), first takes an in-flight slot of [`super::streams`]: the per-address share
//! holds for requests as for connections.
//!
//! Stop sequence: when `shutdown` resolves, [`Draining`] turns on at once (`/readyz` fails, so
//! the endpoints drop this pod), yet the listener keeps accepting and answering for the drain
//! period, every HTTP/1.1 answer carrying `Connection: close` and every HTTP/2 connection sent
//! GOAWAY, so clients move to another replica without a race; then it stops accepting, closes
//! idle connections and lets in-flight requests finish (bounded by the request deadline).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderValue, Request, header};
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

use super::admit::{Open, Refusal, last_request, log_due};
use super::deadlines::Deadlines;
pub use super::limits::{Drain, Draining, Limits};
use super::streams::{self, InFlight};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerRefusal {
    /// webhook, metrics or probes.
    pub listener: &'static str,
    /// global_cap or peer_cap (`super::admit::Refusal`).
    pub reason: &'static str,
}

/// `kubevirt_operator_listener_refused_total`: connections a listener refused at a cap.
pub type RefusedConnections = Family<ListenerRefusal, Counter>;

/// Counts every refusal; logs one at most every [`super::admit::LOG_EVERY`], with how many
/// went unlogged since.
struct Refusals {
    listener: &'static str,
    counter: RefusedConnections,
    logged: Option<Instant>,
    unlogged: u64,
}

impl Refusals {
    fn record(&mut self, reason: Refusal, peer: SocketAddr, limits: &Limits) {
        self.counter
            .get_or_create(&ListenerRefusal {
                listener: self.listener,
                reason: reason.as_str(),
            })
            .inc();
        let now = Instant::now();
        if !log_due(self.logged, now) {
            self.unlogged += 1;
            return;
        }
        tracing::warn!(
            listener = self.listener,
            reason = reason.as_str(),
            %peer,
            max_connections = limits.max_connections,
            max_connections_per_client = limits.max_connections_per_client,
            unlogged_since_last = self.unlogged,
            "refused a connection at a cap (logged at most every 10s, all counted)"
        );
        self.logged = Some(now);
        self.unlogged = 0;
    }
}

/// The protocol a connection speaks: HTTP/2 when its TLS handshake chose ALPN `h2`, HTTP/1.1
/// otherwise (no ALPN, `http/1.1`, or plain TCP).
pub trait Negotiated {
    fn h2(&self) -> bool {
        false
    }
}

impl Negotiated for TcpStream {}

impl<IO> Negotiated for tokio_rustls::server::TlsStream<IO> {
    fn h2(&self) -> bool {
        self.get_ref().1.alpn_protocol() == Some(b"h2")
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves and the drain after it
/// ends; `accept` turns each TCP connection into the stream HTTP runs on (a TLS handshake, or
/// the connection itself), None to drop it. Refused connections are counted in `refused`.
pub async fn serve<IO, A, AF>(
    listener: TcpListener,
    limits: Limits,
    app: Router,
    shutdown: impl Future<Output = ()>,
    drain: Drain,
    refused: RefusedConnections,
    accept: A,
) where
    A: Fn(TcpStream, SocketAddr) -> AF + Clone + Send + 'static,
    AF: Future<Output = Option<IO>> + Send,
    IO: AsyncRead + AsyncWrite + Negotiated + Unpin + Send + 'static,
{
    let open = Open::default();
    let in_flight = InFlight::new(limits.max_connections, limits.max_connections_per_client);
    let mut refusals = Refusals {
        listener: limits.name,
        counter: refused,
        logged: None,
        unlogged: 0,
    };
    let graceful = GracefulShutdown::new();
    // HTTP/1.1 connections learn of the stop here, HTTP/2 ones from `graceful`.
    let stop = tokio::sync::watch::Sender::new(false);
    let stop_accepting = async {
        shutdown.await;
        drain.draining.begin();
        tracing::info!(period = ?drain.period, "draining: still answering, then closing");
        tokio::time::sleep(drain.period).await;
    };
    tokio::pin!(stop_accepting);
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
            () = &mut stop_accepting => break,
        };
        let max = limits.max_connections;
        let slot = match open.take(peer.ip(), max, limits.max_connections_per_client) {
            Ok(slot) => slot,
            Err(reason) => {
                refusals.record(reason, peer, &limits);
                drop(tcp);
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let (accept, app, watcher) = (accept.clone(), app.clone(), graceful.watcher());
        let (in_flight, draining) = (in_flight.clone(), drain.draining.clone());
        let mut closing = stop.subscribe();
        tokio::spawn(async move {
            let _slot = slot;
            let Some(io) = accept(tcp, peer).await else {
                return;
            };
            if io.h2() {
                let serving = super::h2::Serving {
                    app,
                    limits,
                    in_flight,
                    draining,
                    watcher,
                };
                return super::h2::serve(io, peer, serving).await;
            }
            let mut builder = hyper::server::conn::http1::Builder::new();
            // hyper's header timeout also runs while a keep-alive connection idles; the
            // deadlines below cover headers without that.
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(None)
                .keep_alive(limits.max_requests_per_connection > 1);
            let io = Deadlines::new(io, limits.request_timeout, limits.idle_timeout);
            let service = bounded(app, limits, in_flight, draining, peer);
            // Upgrades (the aggregated API's WebSockets) hand the connection to their handler;
            // hyper-util's graceful watcher does not take an upgradeable connection, so the
            // stop is watched here (`closing`).
            drop(watcher);
            let conn = builder
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            tokio::pin!(conn);
            // `closing` lives until the connection has ended: `serve` waits for every one of
            // them to be dropped, so a request in flight is answered before the process exits.
            let ended = tokio::select! {
                ended = conn.as_mut() => ended,
                _ = async { closing.wait_for(|stop| *stop).await.is_ok() } => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            drop(closing);
            if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    // In-flight requests are bounded by the request deadline; a second covers the last write.
    let grace = limits.request_timeout + Duration::from_secs(1);
    stop.send_replace(true);
    let all_closed = futures::future::join(graceful.shutdown(), stop.closed());
    if tokio::time::timeout(grace, all_closed).await.is_err() {
        tracing::warn!("in-flight requests did not finish within the request deadline");
    }
}

/// `app` for one HTTP/1.1 connection: each request takes an in-flight slot, and the answer to
/// its last request (by count or age, or any while draining) carries `Connection: close`;
/// hyper closes the connection after writing it.
fn bounded(
    app: Router,
    limits: Limits,
    in_flight: InFlight,
    draining: Draining,
    peer: SocketAddr,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response,
    Error = Infallible,
    Future = impl Future<Output = Result<Response, Infallible>> + Send,
> + Send {
    let served = Arc::new(AtomicU32::new(0));
    let opened = Instant::now();
    hyper::service::service_fn(move |request: Request<Incoming>| {
        let n = served.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        let last = last_request(
            n,
            opened.elapsed(),
            limits.max_requests_per_connection,
            limits.max_connection_age,
        );
        let (app, in_flight, draining) = (app.clone(), in_flight.clone(), draining.clone());
        async move {
            let wait = limits.max_stream_wait;
            let mut response = streams::answer(app, &in_flight, peer.ip(), wait, request).await;
            // An upgrade answered keeps its connection (the WebSocket goes on over it).
            let upgraded = response.status() == axum::http::StatusCode::SWITCHING_PROTOCOLS;
            if (last || draining.is_draining()) && !upgraded {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each listener's bounds, as docs/design/admission.md and docs/operator/security.md give them (the rules
    /// themselves are `tests/listener_limits.rs`'s, the webhook's in production
    /// `tests/webhook_bad_input.rs`'s).
    #[test]
    fn production_limits_are_the_documented_values() {
        let secs = Duration::from_secs;
        let bounds = |l: Limits| {
            (
                (l.name, l.max_connections, l.max_connections_per_client),
                (l.max_requests_per_connection, l.max_connection_age),
                (l.request_timeout, l.idle_timeout),
                (l.max_streams_per_connection, l.max_stream_wait),
            )
        };
        let webhook = bounds(Limits::WEBHOOK);
        assert_eq!(webhook.0, ("webhook", 256, 64));
        assert_eq!(webhook.1, (1000, Some(secs(300))));
        assert_eq!(webhook.2, (secs(10), secs(120)));
        assert_eq!(webhook.3, (100, secs(2)));
        let metrics = bounds(Limits::METRICS);
        assert_eq!(metrics.0, ("metrics", 32, 8));
        assert_eq!(metrics.1, (u32::MAX, None));
        assert_eq!(metrics.2, (secs(10), secs(120)));
        assert_eq!(metrics.3, (8, secs(5)));
        let probes = bounds(Limits::PROBES);
        assert_eq!(probes.0, ("probes", 32, 8));
        assert_eq!(probes.1, (1, None), "no keep-alive");
        assert_eq!(probes.2, (secs(5), secs(5)));
        assert_eq!(probes.3, (1, secs(1)));
        assert_eq!(super::super::server::HANDSHAKE_TIMEOUT, secs(10));
    }
}
