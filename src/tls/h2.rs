//! HTTP/2 on the webhook listener (ALPN `h2`): one connection carries many concurrent reviews,
//! so a client that offers it needs no connection per review and a burst stays under the
//! per-address connection cap (kube-apiserver offers only `http/1.1` to Service webhooks; see
//! docs/design/admission.md). Every bound of [`super::limits::Limits`] keeps its meaning per request
//! (stream): the request deadline cuts a stream, the requests per connection and the
//! connection's age end it with GOAWAY (in-flight streams finish; the client opens a new
//! connection, to this replica or another), draining sends GOAWAY where HTTP/1.1 answers
//! `Connection: close`, and a connection with no stream open for the idle timeout is closed.
//! In-flight streams count against the per-address share as connections do
//! ([`super::streams`]).
//!
//! hyper's own protections stay on and bounded: streams reset before they are served (rapid
//! reset) and streams we reset for errors each end the connection past a small count, headers
//! are bounded, and keep-alive pings find dead peers.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::Watcher;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::limits::{Draining, Limits};
use super::streams::{self, InFlight};

/// Streams reset by the client before we served them, beyond which the connection ends with
/// GOAWAY `ENHANCE_YOUR_CALM` (CVE-2023-44487, rapid reset); hyper's default.
pub const MAX_PENDING_RESETS: usize = 20;
/// Streams we reset for a client's errors, refusals beyond `max_streams_per_connection`
/// included, beyond which the connection ends (CVE-2025-8671); hyper's default. Go's client
/// opens at most 100 streams before it reads our SETTINGS, as many as we allow, so it is never
/// refused; a client that opens more before it knows loses only the excess.
pub const MAX_ERROR_RESETS: usize = 1024;
/// Request headers, decoded: a review's are a few hundred bytes.
pub const MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;
/// The smallest frame size HTTP/2 allows.
pub const MAX_FRAME_BYTES: u32 = 16 * 1024;
/// Unread body a client may send on one stream: a small-lane body fits
/// (`admission::lanes::SMALL_BODY_BYTES`), a large one waits for its permit before it is read.
pub const STREAM_WINDOW_BYTES: u32 = 128 * 1024;
/// Unread body on one connection, over all its streams.
pub const CONNECTION_WINDOW_BYTES: u32 = 512 * 1024;
/// A ping after this long without a frame from the client, and its answer expected within
/// [`PING_TIMEOUT`]: a peer gone without a FIN is found.
pub const PING_EVERY: Duration = Duration::from_secs(30);
pub const PING_TIMEOUT: Duration = Duration::from_secs(20);

/// hyper's HTTP/2 server with the bounds above and `limits`' streams per connection.
pub fn builder(limits: &Limits) -> hyper::server::conn::http2::Builder<TokioExecutor> {
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_streams_per_connection)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_local_error_reset_streams(MAX_ERROR_RESETS)
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
        .max_send_buf_size(STREAM_WINDOW_BYTES as usize)
        .keep_alive_interval(PING_EVERY)
        .keep_alive_timeout(PING_TIMEOUT);
    builder
}

/// Why a connection is sent GOAWAY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// It carried `max_requests_per_connection` streams.
    Served,
    /// It is `max_connection_age` old.
    Age,
    /// The listener is draining.
    Draining,
    /// No stream opened within the request deadline of the handshake.
    FirstRequestLate,
    /// No stream open for the idle timeout.
    Idle,
}

/// What a connection does next: go on until the instant given (then decide again; None: until
/// something changes), or end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Keep(Option<Instant>),
    GoAway(End),
}

/// What is known of a connection when its fate is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    pub opened: Instant,
    /// Streams it has carried to the app (each counts once it arrives).
    pub served: u32,
    /// Streams being answered now.
    pub active: u32,
    /// When the last stream ended (`opened` before the first).
    pub quiet_since: Instant,
    pub draining: bool,
}

/// A connection's fate, as HTTP/1.1's `Connection: close` rules are in `super::admit`.
/// Draining ends a connection once it has carried a stream: a new one opened during the drain
/// is answered once, as HTTP/1.1 answers one request with `Connection: close`.
pub fn fate(c: &Observed, limits: &Limits, now: Instant) -> Fate {
    let aged = limits.max_connection_age.map(|age| c.opened + age);
    if c.served >= limits.max_requests_per_connection.max(1) {
        return Fate::GoAway(End::Served);
    }
    if aged.is_some_and(|at| now >= at) {
        return Fate::GoAway(End::Age);
    }
    if c.draining && c.served > 0 {
        return Fate::GoAway(End::Draining);
    }
    let quiet = match (c.active, c.served) {
        (0, 0) => Some((c.opened + limits.request_timeout, End::FirstRequestLate)),
        (0, _) => Some((c.quiet_since + limits.idle_timeout, End::Idle)),
        _ => None,
    };
    match quiet {
        Some((at, end)) if now >= at => Fate::GoAway(end),
        _ => Fate::Keep(match (quiet.map(|q| q.0), aged) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }),
    }
}

/// The counts the streams keep and [`fate`] reads; every change is notified.
#[derive(Debug)]
struct Tally {
    counts: Mutex<(u32, u32, Instant)>,
    changed: Notify,
}

/// A stream's place in the tally, given back when its answer is done or dropped.
struct Streaming(Arc<Tally>);

impl Tally {
    fn begin(self: &Arc<Self>) -> Streaming {
        let mut c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        c.0 = c.0.saturating_add(1);
        c.1 += 1;
        self.changed.notify_one();
        Streaming(self.clone())
    }

    fn observe(&self, opened: Instant, draining: bool) -> Observed {
        let (served, active, quiet_since) =
            *self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        Observed {
            opened,
            served,
            active,
            quiet_since,
            draining,
        }
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        let mut c = self.0.counts.lock().unwrap_or_else(PoisonError::into_inner);
        c.1 = c.1.saturating_sub(1);
        if c.1 == 0 {
            c.2 = Instant::now();
        }
        self.0.changed.notify_one();
    }
}

/// What the listener gives each HTTP/2 connection.
pub struct Serving {
    pub app: Router,
    pub limits: Limits,
    pub in_flight: InFlight,
    pub draining: Draining,
    /// Held until the connection ends, so the listener's last wait covers it.
    pub watcher: Watcher,
}

/// Serves one HTTP/2 connection from `peer` until its [`fate`] ends it and its streams finish.
pub async fn serve<IO>(io: IO, peer: SocketAddr, serving: Serving)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Serving {
        app,
        limits,
        in_flight,
        draining,
        watcher: _watcher,
    } = serving;
    let opened = Instant::now();
    let tally = Arc::new(Tally {
        counts: Mutex::new((0, 0, opened)),
        changed: Notify::new(),
    });
    let streams = tally.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let streaming = streams.begin();
        let (app, in_flight) = (app.clone(), in_flight.clone());
        async move {
            let answer =
                streams::answer(app, &in_flight, peer.ip(), limits.max_stream_wait, request);
            // The request deadline, per stream: reading the body and answering.
            let response = tokio::time::timeout(limits.request_timeout, answer)
                .await
                .unwrap_or_else(|_| late());
            drop(streaming);
            Ok::<_, Infallible>(response)
        }
    });
    let conn = builder(&limits).serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let end = loop {
        let observed = tally.observe(opened, draining.is_draining());
        let until = match fate(&observed, &limits, Instant::now()) {
            Fate::GoAway(end) => break end,
            Fate::Keep(until) => until,
        };
        let wake = async {
            match until {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            done = conn.as_mut() => return ended(peer, done),
            () = wake => {}
            () = tally.changed.notified() => {}
            () = draining.begun(), if !observed.draining => {}
        }
    };
    tracing::debug!(%peer, reason = ?end, "HTTP/2 connection: GOAWAY");
    conn.as_mut().graceful_shutdown();
    // In-flight streams are bounded by the request deadline; a second covers the last write.
    match tokio::time::timeout(limits.request_timeout + Duration::from_secs(1), conn).await {
        Ok(done) => ended(peer, done),
        Err(_) => tracing::debug!(%peer, "HTTP/2 connection cut after GOAWAY"),
    }
}

fn ended(peer: SocketAddr, done: hyper::Result<()>) {
    if let Err(e) = done {
        tracing::debug!(%peer, error = %e, "HTTP/2 connection ended with an error");
    }
}

fn late() -> Response {
    (
        StatusCode::REQUEST_TIMEOUT,
        "request not completed in time\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_a_connection_is_sent_goaway() {
        let s = Duration::from_secs;
        let t = Instant::now();
        let limits = Limits::WEBHOOK;
        let at = |served, active, quiet: u64, draining| Observed {
            opened: t,
            served,
            active,
            quiet_since: t + s(quiet),
            draining,
        };
        use End::*;
        use Fate::*;
        // (connection, seconds since it opened) => fate
        let cases = [
            // Fresh: its first stream is due within the request deadline.
            (at(0, 0, 0, false), 0, Keep(Some(t + s(10)))),
            (at(0, 0, 0, false), 10, GoAway(FirstRequestLate)),
            // Busy: only its age bounds it.
            (at(1, 1, 0, false), 5, Keep(Some(t + s(300)))),
            (at(500, 64, 0, false), 299, Keep(Some(t + s(300)))),
            (at(3, 2, 0, false), 300, GoAway(Age)),
            // Quiet since 50 s: idle at 170 s.
            (at(7, 0, 50, false), 60, Keep(Some(t + s(170)))),
            (at(7, 0, 50, false), 170, GoAway(Idle)),
            // Its last stream arrived: GOAWAY, the streams in flight finish.
            (at(1000, 1, 0, false), 1, GoAway(Served)),
            // Draining: once it carried a stream, as HTTP/1.1's one `Connection: close` answer.
            (at(1, 1, 0, true), 1, GoAway(Draining)),
            (at(0, 0, 0, true), 1, Keep(Some(t + s(10)))),
        ];
        for (connection, secs, want) in cases {
            assert_eq!(
                fate(&connection, &limits, t + s(secs)),
                want,
                "{connection:?} at {secs}s"
            );
        }
        // Without an age limit, a busy connection waits for a change.
        let metrics = Limits::METRICS;
        assert_eq!(fate(&at(5, 1, 0, false), &metrics, t + s(9)), Keep(None));
        assert_eq!(
            fate(&at(1, 0, 0, false), &Limits::PROBES, t),
            GoAway(Served)
        );
    }
}
