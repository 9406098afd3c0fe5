//! The console and VNC sessions this replica holds: counted per user and in all, opened only
//! as [`super::sessions::admit`] allows, and counted in the session metrics.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::sessions::{self, End, Kind, Limits, Refusal};
use crate::telemetry::sessions::{KindLabel, KindReason, Metrics};
use crate::tls::listener::Draining;

#[derive(Clone)]
pub struct Held(Arc<Inner>);

struct Inner {
    limits: Limits,
    metrics: Metrics,
    draining: Draining,
    /// Open sessions by user; the total is their sum.
    open: Mutex<HashMap<String, usize>>,
    /// The total, for [`Held::closed`] to wait on.
    count: tokio::sync::watch::Sender<usize>,
}

/// An open session's place; given back when dropped.
pub struct Ticket {
    held: Held,
    user: String,
    kind: Kind,
}

impl Held {
    pub fn new(limits: Limits, metrics: Metrics, draining: Draining) -> Held {
        Held(Arc::new(Inner {
            limits,
            metrics,
            draining,
            open: Mutex::new(HashMap::new()),
            count: tokio::sync::watch::Sender::new(0),
        }))
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    pub fn draining(&self) -> &Draining {
        &self.0.draining
    }

    /// A place for `user`'s new session, or why not (counted as refused).
    pub fn open(&self, user: &str, kind: Kind) -> Result<Ticket, Refusal> {
        let mut open = self.0.open.lock().unwrap_or_else(|p| p.into_inner());
        let total = open.values().sum();
        let of_user = open.get(user).copied().unwrap_or(0);
        let draining = self.0.draining.is_draining();
        if let Err(refusal) = sessions::admit(&self.0.limits, total, of_user, draining) {
            let label = KindReason {
                kind: kind.as_str(),
                reason: refusal.as_str(),
            };
            self.0.metrics.refused.get_or_create(&label).inc();
            return Err(refusal);
        }
        *open.entry(user.to_owned()).or_default() += 1;
        self.0.count.send_replace(total + 1);
        let label = KindLabel {
            kind: kind.as_str(),
        };
        self.0.metrics.open.get_or_create(&label).inc();
        Ok(Ticket {
            held: self.clone(),
            user: user.to_owned(),
            kind,
        })
    }

    /// Waits until no session is open, at most `within`; false if some still are.
    pub async fn closed(&self, within: Duration) -> bool {
        let mut count = self.0.count.subscribe();
        tokio::time::timeout(within, count.wait_for(|n| *n == 0))
            .await
            .is_ok()
    }
}

impl Ticket {
    /// Counts the session's end under `why` (the place is given back on drop).
    pub fn ended(&self, why: End) {
        let label = KindReason {
            kind: self.kind.as_str(),
            reason: why.as_str(),
        };
        self.held.0.metrics.ended.get_or_create(&label).inc();
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let inner = &self.held.0;
        let mut open = inner.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.user);
            }
        }
        inner.count.send_replace(open.values().sum());
        let label = KindLabel {
            kind: self.kind.as_str(),
        };
        inner.metrics.open.get_or_create(&label).dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn places_are_counted_and_given_back() {
        let limits = Limits {
            per_user: 1,
            total: 2,
            idle: Duration::from_secs(60),
            max_length: Duration::from_secs(60),
        };
        let metrics = Metrics::default();
        let held = Held::new(limits, metrics.clone(), Draining::default());
        let a = held.open("alice", Kind::Console).expect("alice's first");
        assert_eq!(
            held.open("alice", Kind::Vnc).err(),
            Some(Refusal::UserCap(1))
        );
        let b = held.open("bob", Kind::Vnc).expect("bob's first");
        assert_eq!(
            held.open("carol", Kind::Console).err(),
            Some(Refusal::TotalCap(2))
        );
        let refused = |reason| {
            let label = KindReason {
                kind: "console",
                reason,
            };
            metrics.refused.get_or_create(&label).get()
        };
        assert_eq!((refused("user_cap"), refused("total_cap")), (0, 1));
        a.ended(End::Idle);
        drop(a);
        assert!(!held.closed(Duration::from_millis(10)).await, "bob's open");
        let again = held.open("alice", Kind::Console).expect("given back");
        drop((again, b));
        assert!(held.closed(Duration::from_millis(10)).await);
        let open = metrics
            .open
            .get_or_create(&KindLabel { kind: "console" })
            .get();
        assert_eq!(open, 0);
    }
}
