//! What keeps the access check cheap and fair under a stream of reviews: verdicts remembered for
//! a few seconds per (user, groups, uid, extra, attributes), and the calls in flight (reviews and
//! the look-ups made for them) shared in turn by requesting user, so one user's reviews, or a
//! stream of reviews under ever-new names, cannot starve another's.
//!
//! A remembered verdict is at most [`VERDICT_TTL`] old: a right revoked that long ago still
//! counts as granted for that long (RBAC caches in kube-apiserver's own authorizers behave
//! alike). The cache is bounded ([`MAX_VERDICTS`]); when full, expired entries go first, then it
//! is cleared (a burst of distinct reviews costs calls, never memory).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{Permission, UserInfo};

/// How long a verdict is remembered.
pub const VERDICT_TTL: Duration = Duration::from_secs(5);
/// Verdicts remembered at most.
pub const MAX_VERDICTS: usize = 4096;

/// Who asks and what, as a SubjectAccessReview would: the cache's key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VerdictKey {
    user: String,
    uid: String,
    groups: Vec<String>,
    extra: Vec<(String, Vec<String>)>,
    attributes: [String; 6],
}

impl VerdictKey {
    pub fn new(user: &UserInfo, p: &Permission) -> Self {
        VerdictKey {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            attributes: p.review_key().map(str::to_owned),
        }
    }
}

/// Remembered verdicts (pure apart from the clock the caller passes).
#[derive(Default)]
pub struct Verdicts {
    entries: HashMap<VerdictKey, (bool, Instant)>,
}

impl Verdicts {
    /// The verdict remembered for `key`, if younger than [`VERDICT_TTL`] at `now`.
    pub fn get(&self, key: &VerdictKey, now: Instant) -> Option<bool> {
        let (allowed, at) = self.entries.get(key)?;
        (now.saturating_duration_since(*at) < VERDICT_TTL).then_some(*allowed)
    }

    pub fn put(&mut self, key: VerdictKey, allowed: bool, now: Instant) {
        if self.entries.len() >= MAX_VERDICTS {
            self.entries
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < VERDICT_TTL);
            if self.entries.len() >= MAX_VERDICTS {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (allowed, now));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The calls to kube-apiserver in flight at once, over every requesting user.
pub const MAX_CALLS: usize = 16;
/// Waiters kept before the ones whose review already gave up are swept.
const SWEEP_AT: usize = 4096;

/// Every requesting user's turn at the [`MAX_CALLS`] calls in flight: a freed slot goes to the
/// next user in rotation, so a user with one call waits behind at most one call of each other
/// waiting user, however many calls they queued (fair queueing by user).
#[derive(Default)]
pub struct Shares {
    state: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    in_flight: usize,
    /// Users with waiters, in turn order; each user's waiters in arrival order.
    turns: VecDeque<(String, VecDeque<oneshot::Sender<()>>)>,
    waiting: usize,
}

/// A slot in flight; the next waiter in rotation gets it when dropped.
pub struct Share {
    shares: Arc<Shares>,
}

/// A waiter; dropped unserved (its review gave up), it hands on a slot sent to it meanwhile.
struct Waiting {
    rx: oneshot::Receiver<()>,
    shares: Arc<Shares>,
    served: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.served {
            self.rx.close();
            if self.rx.try_recv().is_ok() {
                self.shares.release();
            }
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.shares.release();
    }
}

impl Shares {
    /// Waits for `user`'s turn at a slot. A waiter dropped (its review gave up at the deadline)
    /// leaves the queue without taking a slot.
    pub async fn acquire(self: &Arc<Self>, user: &str) -> Option<Share> {
        let rx = {
            let mut q = self.state.lock().ok()?;
            // Free slots with only abandoned waiters queued: hand them on, skipping those.
            while q.in_flight < MAX_CALLS {
                let Some(tx) = q.next_waiter() else { break };
                q.in_flight += 1;
                if tx.send(()).is_err() {
                    q.in_flight -= 1;
                }
            }
            if q.in_flight < MAX_CALLS {
                q.in_flight += 1;
                return Some(Share {
                    shares: self.clone(),
                });
            }
            let (tx, rx) = oneshot::channel();
            q.enqueue(user, tx);
            rx
        };
        let mut waiting = Waiting {
            rx,
            shares: self.clone(),
            served: false,
        };
        // The releaser counted the slot as ours when it sent.
        (&mut waiting.rx).await.ok()?;
        waiting.served = true;
        Some(Share {
            shares: self.clone(),
        })
    }

    fn release(&self) {
        let Ok(mut q) = self.state.lock() else {
            return;
        };
        q.in_flight -= 1;
        while let Some(tx) = q.next_waiter() {
            q.in_flight += 1;
            if tx.send(()).is_ok() {
                return;
            }
            q.in_flight -= 1;
        }
    }

    /// Users with calls waiting.
    pub fn waiting_users(&self) -> usize {
        self.state.lock().map(|q| q.turns.len()).unwrap_or_default()
    }
}

impl Queue {
    fn enqueue(&mut self, user: &str, tx: oneshot::Sender<()>) {
        if self.waiting >= SWEEP_AT {
            for (_, waiters) in &mut self.turns {
                waiters.retain(|w| !w.is_closed());
            }
            self.turns.retain(|(_, w)| !w.is_empty());
            self.waiting = self.turns.iter().map(|(_, w)| w.len()).sum();
        }
        self.waiting += 1;
        match self.turns.iter_mut().find(|(u, _)| u == user) {
            Some((_, waiters)) => waiters.push_back(tx),
            None => self
                .turns
                .push_back((user.to_owned(), VecDeque::from([tx]))),
        }
    }

    /// The first waiter of the user whose turn it is; that user goes to the back of the line.
    fn next_waiter(&mut self) -> Option<oneshot::Sender<()>> {
        let (user, mut waiters) = self.turns.pop_front()?;
        let tx = waiters.pop_front();
        self.waiting -= 1;
        if !waiters.is_empty() {
            self.turns.push_back((user, waiters));
        }
        tx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(user: &str, groups: &[&str], name: &str) -> VerdictKey {
        let u = UserInfo {
            username: user.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..UserInfo::default()
        };
        let p = Permission {
            field: "spec.cloudInit.secretRef.name".into(),
            verb: "get".into(),
            group: String::new(),
            resource: "secrets".into(),
            subresource: String::new(),
            namespace: "team-a".into(),
            name: name.into(),
            adopted: false,
        };
        VerdictKey::new(&u, &p)
    }

    #[test]
    fn a_verdict_is_remembered_per_user_groups_and_attributes_for_a_few_seconds() {
        let mut v = Verdicts::default();
        let t0 = Instant::now();
        v.put(key("bob", &["dev"], "db"), false, t0);
        assert_eq!(v.get(&key("bob", &["dev"], "db"), t0), Some(false));
        assert_eq!(
            v.get(
                &key("bob", &["dev"], "db"),
                t0 + VERDICT_TTL - Duration::from_millis(1)
            ),
            Some(false)
        );
        assert_eq!(
            v.get(&key("bob", &["dev"], "db"), t0 + VERDICT_TTL),
            None,
            "expired"
        );
        // Another user, other groups, another object: not the same question.
        assert_eq!(v.get(&key("alice", &["dev"], "db"), t0), None);
        assert_eq!(v.get(&key("bob", &["dev", "admins"], "db"), t0), None);
        assert_eq!(v.get(&key("bob", &["dev"], "other"), t0), None);
    }

    #[test]
    fn the_cache_never_grows_past_its_bound() {
        let mut v = Verdicts::default();
        let t0 = Instant::now();
        for i in 0..MAX_VERDICTS + 10 {
            v.put(key("bob", &[], &format!("s{i}")), true, t0);
        }
        assert!(v.len() <= MAX_VERDICTS, "{}", v.len());
        // Expired entries go first: later ones survive a sweep.
        let later = t0 + VERDICT_TTL * 2;
        let mut v = Verdicts::default();
        for i in 0..MAX_VERDICTS - 1 {
            v.put(key("old", &[], &format!("s{i}")), true, t0);
        }
        v.put(key("new", &[], "x"), true, later);
        v.put(key("new", &[], "y"), true, later);
        assert_eq!(v.len(), 2, "the expired ones were swept");
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_next_user_in_turn_however_many_another_queued() {
        let shares = Arc::new(Shares::default());
        let mut held = Vec::new();
        for _ in 0..MAX_CALLS {
            held.push(shares.acquire("mallory").await.expect("slot"));
        }
        let mut mallory: Vec<_> = (0..100)
            .map(|_| Box::pin(shares.acquire("mallory")))
            .collect();
        for waiter in &mut mallory {
            assert!(futures::poll!(waiter).is_pending(), "all slots are taken");
        }
        let mut alice = Box::pin(shares.acquire("alice"));
        assert!(futures::poll!(&mut alice).is_pending());
        assert_eq!(shares.waiting_users(), 2);
        // Two slots freed: one to mallory's first waiter, the next to alice, whose turn it is.
        held.pop();
        held.pop();
        let first = futures::poll!(&mut mallory[0]);
        let second = futures::poll!(&mut alice);
        assert!(matches!(first, std::task::Poll::Ready(Some(_))));
        assert!(
            matches!(second, std::task::Poll::Ready(Some(_))),
            "alice's turn"
        );
        assert!(
            futures::poll!(&mut mallory[1]).is_pending(),
            "no third slot"
        );
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_takes_no_slot_with_it() {
        let shares = Arc::new(Shares::default());
        let mut held = Vec::new();
        for _ in 0..MAX_CALLS {
            held.push(shares.acquire("a").await.expect("slot"));
        }
        // Abandoned before and after a slot was sent to them.
        let mut before = Box::pin(shares.acquire("b"));
        assert!(futures::poll!(&mut before).is_pending());
        let mut after = Box::pin(shares.acquire("c"));
        assert!(futures::poll!(&mut after).is_pending());
        drop(before);
        held.pop(); // sent to c, who never looks
        drop(after);
        drop(held);
        // Every slot is free again.
        let mut again = Vec::new();
        for _ in 0..MAX_CALLS {
            let slot = tokio::time::timeout(Duration::from_secs(1), shares.acquire("d"));
            again.push(slot.await.expect("a free slot").expect("slot"));
        }
        assert_eq!(shares.waiting_users(), 0);
    }
}
