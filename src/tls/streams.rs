//! Requests in flight, in all and per client address: the connection caps of [`super::admit`]
//! carried over to HTTP/2, where one connection carries many requests (streams).
//!
//! Under HTTP/1.1 a connection has one request in flight, so the connection caps bounded what
//! one address could have in flight. Under HTTP/2 they do not, so every request, whatever its
//! protocol, takes a slot here first: at most the per-client share from one address and the
//! listener's cap in all. A request beyond its address's share waits among that address's own
//! requests, first come first served, for at most the wait its limits allow, then is answered
//! 503: a flood of streams from one address queues behind itself, and another address's
//! requests meet at most that share of it ahead of them in the admission lanes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tower::ServiceExt;

/// When a request arrived at the listener: the admission budget counts from here, so time
/// spent waiting for an in-flight slot is part of it (see `admission::lanes`).
#[derive(Clone, Copy, Debug)]
pub struct Arrived(pub Instant);

/// The in-flight request slots of one listener.
#[derive(Clone, Debug)]
pub struct InFlight {
    all: Arc<Semaphore>,
    per_peer: usize,
    peers: Arc<Mutex<HashMap<IpAddr, Arc<Semaphore>>>>,
}

/// A request's slot, given back when the request ends (answered, reset or cut).
#[derive(Debug)]
pub struct StreamSlot {
    // Dropped in this order: the listener's slot, then the address's, then the map is tidied.
    all: Option<OwnedSemaphorePermit>,
    peer: Option<OwnedSemaphorePermit>,
    key: IpAddr,
    peers: Arc<Mutex<HashMap<IpAddr, Arc<Semaphore>>>>,
}

/// The slots a listener gives: `(from one address, in all)`. Never zero, and an address's share
/// is never more than the whole.
pub fn slots(max: usize, max_per_peer: usize) -> (usize, usize) {
    let all = max.max(1);
    (max_per_peer.clamp(1, all), all)
}

impl InFlight {
    /// Slots for `max` requests in all and `max_per_peer` from one address.
    pub fn new(max: usize, max_per_peer: usize) -> Self {
        let (per_peer, all) = slots(max, max_per_peer);
        InFlight {
            all: Arc::new(Semaphore::new(all)),
            per_peer,
            peers: Arc::default(),
        }
    }

    /// A slot for a request from `peer`, or None if none came free by `until`. The address's
    /// slot is taken first: whoever waits for one of the listener's holds its address's
    /// already, so at most an address's share of requests from one address wait there.
    pub async fn take(&self, peer: IpAddr, until: Instant) -> Option<StreamSlot> {
        let key = peer.to_canonical();
        let queue = {
            let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
            peers
                .entry(key)
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_peer)))
                .clone()
        };
        let mut slot = StreamSlot {
            all: None,
            peer: None,
            key,
            peers: self.peers.clone(),
        };
        // The waits own their Arc, so an abandoned wait leaves no count behind for the tidying.
        let peer = tokio::time::timeout_at(until, queue.acquire_owned()).await;
        slot.peer = Some(peer.ok()?.ok()?);
        let all = tokio::time::timeout_at(until, self.all.clone().acquire_owned()).await;
        slot.all = Some(all.ok()?.ok()?);
        Some(slot)
    }

    /// Requests in flight from `peer` (its slots taken), and addresses with a queue.
    pub fn counts(&self, peer: IpAddr) -> (usize, usize) {
        let peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let from_peer = peers
            .get(&peer.to_canonical())
            .map_or(0, |q| self.per_peer - q.available_permits());
        (from_peer, peers.len())
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        drop(self.all.take());
        drop(self.peer.take());
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        // Nobody else holds or waits on this address's queue: forget it, so the map is bounded
        // by the requests in flight rather than by every address ever seen.
        if peers
            .get(&self.key)
            .is_some_and(|q| Arc::strong_count(q) == 1)
        {
            peers.remove(&self.key);
        }
    }
}

/// Answers `request` from `peer` with `app` once it holds an in-flight slot; 503 if none came
/// free within `wait` (kube-apiserver then reports it rather than waiting out its timeout).
pub async fn answer<B>(
    app: Router,
    in_flight: &InFlight,
    peer: IpAddr,
    wait: Duration,
    mut request: Request<B>,
) -> Response
where
    B: axum::body::HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let arrived = Instant::now();
    request.extensions_mut().insert(Arrived(arrived));
    let Some(_slot) = in_flight.take(peer, arrived + wait).await else {
        return busy();
    };
    match app.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

fn busy() -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        "too many requests in flight, from this address or in all; retry\n",
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slots_a_listener_gives() {
        // (max, max per address) => (per address, in all)
        let cases = [
            ((256, 64), (64, 256)),
            ((32, 8), (8, 32)),
            // A share above the whole is the whole; zero counts as one.
            ((4, 10), (4, 4)),
            ((0, 0), (1, 1)),
            ((10, 0), (1, 10)),
        ];
        for ((max, per_peer), want) in cases {
            assert_eq!(slots(max, per_peer), want, "caps {max}/{per_peer}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_at_its_share_waits_while_another_is_served() {
        let a: IpAddr = [10, 0, 0, 1].into();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().expect("ip");
        let b: IpAddr = [10, 0, 0, 2].into();
        let in_flight = InFlight::new(3, 2);
        let soon = || Instant::now() + Duration::from_secs(1);
        let first = in_flight.take(a, soon()).await.expect("first");
        let _second = in_flight.take(mapped, soon()).await.expect("same address");
        assert_eq!(in_flight.counts(a), (2, 1));
        // The third from `a` waits its wait out; `b` is served meanwhile.
        let started = Instant::now();
        assert!(in_flight.take(a, soon()).await.is_none());
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        let third = in_flight.take(b, soon()).await.expect("another address");
        // The listener's cap is reached: a fourth address waits too.
        assert!(in_flight.take([10, 0, 0, 3].into(), soon()).await.is_none());
        // A slot given back goes to the next waiter of that address.
        let waiter = {
            let in_flight = in_flight.clone();
            tokio::spawn(async move { in_flight.take(a, soon()).await.is_some() })
        };
        tokio::task::yield_now().await;
        drop(first);
        assert!(waiter.await.expect("task"), "the waiter is served");
        // Addresses with nothing in flight are forgotten.
        drop(third);
        assert_eq!(in_flight.counts(b), (0, 1));
    }
}
