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
//! Stop sequence: when `shutdown` resolves, [`Draining`] turns on at once (`/readyz` fails, so
//! the endpoints drop this pod), yet the listener keeps accepting and answering for the drain
//! period, every answer carrying `Connection: close` so clients move to another replica
//! without a race; then it stops accepting, closes idle connections and lets in-flight requests
//! finish (bounded by the request deadline).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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
use tower::ServiceExt;

use super::admit::{Open, Refusal, last_request, log_due};
use super::deadlines::Deadlines;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerRefusal {
    /// webhook, metrics or probes.
    pub listener: &'static str,
    /// global_cap or peer_cap (`super::admit::Refusal`).
    pub reason: &'static str,
}

/// `kubevirt_operator_listener_refused_total`: connections a listener refused at a cap.
pub type RefusedConnections = Family<ListenerRefusal, Counter>;

/// Per-listener bounds. A connection beyond a cap is refused (accepted and closed), so a flood
/// never grows our memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The `listener` label of the refusal counter and log.
    pub name: &'static str,
    pub max_connections: usize,
    /// Connections one client address may hold: a fraction of `max_connections`, so a single
    /// client cannot take every slot.
    pub max_connections_per_client: usize,
    /// Requests one connection serves; the last answer carries `Connection: close` (1: no
    /// keep-alive).
    pub max_requests_per_connection: u32,
    /// After this, a connection's next answer carries `Connection: close`.
    pub max_connection_age: Option<Duration>,
    /// Time for a new connection's first request, and for each request once its first byte
    /// arrived, to be read and answered (headers included: slow headers are cut here).
    pub request_timeout: Duration,
    /// Time a keep-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
}

impl Limits {
    /// kube-apiserver keeps idle webhook connections for 90 s: ours outlive them (the client
    /// always closes first). 256 connections at ~40 KiB of TLS and HTTP buffers each stay near
    /// 10 MiB. A connection ends after 1000 requests or 5 minutes, so that after a rollout the
    /// load spreads over the new replicas instead of staying on the first one up.
    pub const WEBHOOK: Limits = Limits {
        name: "webhook",
        max_connections: 256,
        max_connections_per_client: 64,
        max_requests_per_connection: 1000,
        max_connection_age: Some(Duration::from_secs(300)),
        request_timeout: super::deadlines::REQUEST_TIMEOUT,
        idle_timeout: super::deadlines::IDLE_TIMEOUT,
    };
    /// The kubelet probes on a fresh connection each time, within its 1 s default timeout: no
    /// keep-alive, so no one can hold a connection between probes.
    pub const PROBES: Limits = Limits {
        name: "probes",
        max_connections: 32,
        max_connections_per_client: 8,
        max_requests_per_connection: 1,
        max_connection_age: None,
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
    };
    /// Prometheus keeps its connection between scrapes (15-60 s apart).
    pub const METRICS: Limits = Limits {
        name: "metrics",
        max_connections: 32,
        max_connections_per_client: 8,
        max_requests_per_connection: u32::MAX,
        max_connection_age: None,
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(120),
    };

    /// These limits with `n` connections per client address (a setting, checked at start-up).
    pub const fn with_per_client(self, n: usize) -> Limits {
        Limits {
            max_connections_per_client: n,
            ..self
        }
    }
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
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let draining = drain.draining.clone();
    let app = app.layer(axum::middleware::map_response(move |response| {
        let draining = draining.clone();
        async move { close_when_draining(response, &draining) }
    }));
    let open = Open::default();
    let mut refusals = Refusals {
        listener: limits.name,
        counter: refused,
        logged: None,
        unlogged: 0,
    };
    let graceful = GracefulShutdown::new();
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
                .keep_alive(limits.max_requests_per_connection > 1);
            let io = Deadlines::new(io, limits.request_timeout, limits.idle_timeout);
            let conn = builder.serve_connection(TokioIo::new(io), bounded(app, limits));
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

/// `app` for one connection: the answer to its last request (by count or age) carries
/// `Connection: close`, and hyper closes the connection after writing it.
fn bounded(
    app: Router,
    limits: Limits,
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
        let answer = app.clone().oneshot(request);
        async move {
            let mut response = answer.await?;
            if last {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response)
        }
    })
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
            )
        };
        let webhook = bounds(Limits::WEBHOOK);
        assert_eq!(webhook.0, ("webhook", 256, 64));
        assert_eq!(webhook.1, (1000, Some(secs(300))));
        assert_eq!(webhook.2, (secs(10), secs(120)));
        let metrics = bounds(Limits::METRICS);
        assert_eq!(metrics.0, ("metrics", 32, 8));
        assert_eq!(metrics.1, (u32::MAX, None));
        assert_eq!(metrics.2, (secs(10), secs(120)));
        let probes = bounds(Limits::PROBES);
        assert_eq!(probes.0, ("probes", 32, 8));
        assert_eq!(probes.1, (1, None), "no keep-alive");
        assert_eq!(probes.2, (secs(5), secs(5)));
        assert_eq!(super::super::server::HANDSHAKE_TIMEOUT, secs(10));
    }
}
