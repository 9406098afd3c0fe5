//! What bounds a listener ([`Limits`]) and how it learns to stop ([`Draining`], [`Drain`]): shared
//! by the accept loop of [`super::listener`] and its HTTP/2 side, [`super::h2`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Per-listener bounds. A connection beyond a cap is refused (accepted and closed), so a flood
/// never grows our memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The `listener` label of the refusal counter and log.
    pub name: &'static str,
    pub max_connections: usize,
    /// Connections one client address may hold: a fraction of `max_connections`, so a single
    /// client cannot take every slot. Requests in flight are bounded alike: `max_connections`
    /// in all, this many from one address (HTTP/2 streams count one each).
    pub max_connections_per_client: usize,
    /// Requests one connection serves; the last answer carries `Connection: close` (1: no
    /// keep-alive), or under HTTP/2 the last stream brings GOAWAY.
    pub max_requests_per_connection: u32,
    /// After this, a connection's next answer carries `Connection: close` (HTTP/2: GOAWAY).
    pub max_connection_age: Option<Duration>,
    /// HTTP/2 streams one connection may have open (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_streams_per_connection: u32,
    /// How long a request beyond its address's in-flight share waits for a slot before it is
    /// answered 503.
    pub max_stream_wait: Duration,
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
    /// load spreads over the new replicas instead of staying on the first one up. Over HTTP/2
    /// one connection carries up to 100 reviews at once (Go's client opens another beyond);
    /// one address has at most 64 in flight, the rest wait up to 2 s (the admission lanes'
    /// wait) among themselves.
    pub const WEBHOOK: Limits = Limits {
        name: "webhook",
        max_connections: 256,
        max_connections_per_client: 64,
        max_requests_per_connection: 1000,
        max_connection_age: Some(Duration::from_secs(300)),
        max_streams_per_connection: 100,
        max_stream_wait: Duration::from_secs(2),
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
        max_streams_per_connection: 1,
        max_stream_wait: Duration::from_secs(1),
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
        max_streams_per_connection: 8,
        max_stream_wait: Duration::from_secs(5),
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
pub struct Draining(Arc<(AtomicBool, Notify)>);

impl Draining {
    pub fn begin(&self) {
        self.0.0.store(true, Ordering::Release);
        self.0.1.notify_waiters();
    }

    pub fn is_draining(&self) -> bool {
        self.0.0.load(Ordering::Acquire)
    }

    /// Resolves once draining has begun.
    pub async fn begun(&self) {
        let notified = self.0.1.notified();
        tokio::pin!(notified);
        // Registered before the flag is read, so a `begin` in between is not missed.
        notified.as_mut().enable();
        if !self.is_draining() {
            notified.await;
        }
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
