//! Who gets a connection: the caps of [`super::listener`] as pure rules (which connection is
//! refused, when a connection has served enough, when a refusal is logged) and the counts they
//! read, kept per client address so one client cannot take every slot.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Why a connection was refused; the `reason` label of
/// `kubevirt_operator_listener_refused_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The listener holds its global cap of connections.
    GlobalCap,
    /// This client address holds its own cap.
    PeerCap,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::GlobalCap => "global_cap",
            Refusal::PeerCap => "peer_cap",
        }
    }
}

/// Whether a new connection may be served, given the connections open on the listener and from
/// its client's address. The client's own cap is named first: it is the one that client can
/// do something about.
pub fn admit(
    open: usize,
    open_from_peer: usize,
    max: usize,
    max_per_peer: usize,
) -> Result<(), Refusal> {
    if open_from_peer >= max_per_peer.max(1) {
        Err(Refusal::PeerCap)
    } else if open >= max.max(1) {
        Err(Refusal::GlobalCap)
    } else {
        Ok(())
    }
}

/// Whether the answer to a connection's `served`-th request (1 for the first) is its last:
/// its response then carries `Connection: close`, and the client opens a new connection, to
/// this replica or another.
pub fn last_request(
    served: u32,
    age: Duration,
    max_requests: u32,
    max_age: Option<Duration>,
) -> bool {
    served >= max_requests.max(1) || max_age.is_some_and(|max| age >= max)
}

/// At most one refusal log line per listener in this long, so a flood cannot flood the log
/// (the counter still counts every refusal).
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Whether a refusal at `now` is logged, the last one having been logged at `last`.
pub fn log_due(last: Option<Instant>, now: Instant) -> bool {
    last.is_none_or(|last| now.saturating_duration_since(last) >= LOG_EVERY)
}

/// IPv4 clients of a dual-stack socket appear as `::ffff:a.b.c.d`: one client, one key.
fn key(peer: IpAddr) -> IpAddr {
    peer.to_canonical()
}

#[derive(Debug, Default)]
struct Counts {
    open: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// The connections a listener has open, in all and per client address.
#[derive(Clone, Debug, Default)]
pub struct Open(Arc<Mutex<Counts>>);

/// A served connection's place in the counts, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    open: Open,
    peer: IpAddr,
}

impl Open {
    /// Takes a slot for a connection from `peer`, or says which cap refuses it.
    pub fn take(&self, peer: IpAddr, max: usize, max_per_peer: usize) -> Result<Slot, Refusal> {
        let peer = key(peer);
        // The counts stay consistent under any panic: every update is one statement.
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let from_peer = counts.by_peer.get(&peer).copied().unwrap_or(0);
        admit(counts.open, from_peer, max, max_per_peer)?;
        counts.open += 1;
        *counts.by_peer.entry(peer).or_insert(0) += 1;
        Ok(Slot {
            open: self.clone(),
            peer,
        })
    }

    /// Connections open, in all and from `peer`.
    pub fn counts(&self, peer: IpAddr) -> (usize, usize) {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let from_peer = counts.by_peer.get(&key(peer)).copied().unwrap_or(0);
        (counts.open, from_peer)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.open.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts.open = counts.open.saturating_sub(1);
        if let Some(n) = counts.by_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                // An address with nothing open costs nothing: the map is bounded by the cap.
                counts.by_peer.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_decision() {
        use Refusal::*;
        // (open, open from the peer, max, max per peer) => decision
        let cases = [
            ((0, 0, 256, 64), Ok(())),
            ((255, 63, 256, 64), Ok(())),
            ((100, 64, 256, 64), Err(PeerCap)),
            ((256, 0, 256, 64), Err(GlobalCap)),
            // Both at their cap: the client's own is named.
            ((256, 64, 256, 64), Err(PeerCap)),
            ((31, 7, 32, 8), Ok(())),
            ((10, 8, 32, 8), Err(PeerCap)),
            // A cap of zero would refuse everyone: it counts as one.
            ((0, 0, 0, 0), Ok(())),
            ((1, 0, 0, 5), Err(GlobalCap)),
        ];
        for ((open, from_peer, max, per_peer), want) in cases {
            assert_eq!(
                admit(open, from_peer, max, per_peer),
                want,
                "{open} open, {from_peer} from the peer, caps {max}/{per_peer}"
            );
        }
    }

    #[test]
    fn when_a_connection_has_served_enough() {
        let s = Duration::from_secs;
        // (served, age, max requests, max age) => last
        let cases = [
            ((1, s(0), 1, None), true),
            ((1, s(0), 1000, Some(s(300))), false),
            ((999, s(299), 1000, Some(s(300))), false),
            ((1000, s(1), 1000, Some(s(300))), true),
            ((2, s(300), 1000, Some(s(300))), true),
            ((5, s(86_400), u32::MAX, None), false),
            ((1, s(0), 0, None), true),
        ];
        for ((served, age, max, max_age), want) in cases {
            assert_eq!(
                last_request(served, age, max, max_age),
                want,
                "request {served} at {age:?}, caps {max}/{max_age:?}"
            );
        }
    }

    #[test]
    fn refusals_are_logged_at_most_every_ten_seconds() {
        let t = Instant::now();
        let cases = [
            (None, t, true),
            (Some(t), t, false),
            (Some(t), t + Duration::from_secs(9), false),
            (Some(t), t + LOG_EVERY, true),
            // A clock that went backwards logs nothing rather than panicking.
            (Some(t + Duration::from_secs(1)), t, false),
        ];
        for (last, now, want) in cases {
            assert_eq!(log_due(last, now), want, "{last:?} {now:?}");
        }
    }

    #[test]
    fn slots_are_counted_per_address_and_given_back() {
        let open = Open::default();
        let a: IpAddr = [10, 0, 0, 1].into();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().expect("ip");
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = open.take(a, 3, 2).expect("first");
        let _second = open.take(mapped, 3, 2).expect("same client over IPv6");
        assert_eq!(open.take(a, 3, 2).unwrap_err(), Refusal::PeerCap);
        let _third = open.take(b, 3, 2).expect("another client");
        assert_eq!(
            open.take([10, 0, 0, 3].into(), 3, 2).unwrap_err(),
            Refusal::GlobalCap
        );
        assert_eq!(open.counts(a), (3, 2));
        drop(first);
        assert_eq!(open.counts(a), (2, 1));
        open.take(a, 3, 2)
            .expect("a slot given back is taken again");
    }
}
