//! What keeps the access check cheap and fair under a stream of reviews: verdicts remembered for
//! a few seconds per (user, groups, uid, extra, attributes), and a share of the calls in flight
//! per requesting user, so one user's reviews cannot starve another's.
//!
//! A remembered verdict is at most [`VERDICT_TTL`] old: a right revoked that long ago still
//! counts as granted for that long (RBAC caches in kube-apiserver's own authorizers behave
//! alike). The cache is bounded ([`MAX_VERDICTS`]); when full, expired entries go first, then it
//! is cleared (a burst of distinct reviews costs calls, never memory).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Permission, UserInfo};

/// How long a verdict is remembered.
pub const VERDICT_TTL: Duration = Duration::from_secs(5);
/// Verdicts remembered at most.
pub const MAX_VERDICTS: usize = 4096;
/// Calls one requesting user keeps in flight at most, of the reviewer's
/// [`MAX_IN_FLIGHT`](super::review::MAX_IN_FLIGHT).
pub const PER_USER_IN_FLIGHT: usize = 4;

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

/// Each requesting user's share of the calls in flight.
#[derive(Default)]
pub struct Shares {
    per_user: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Shares {
    fn semaphore(&self, user: &str) -> Arc<Semaphore> {
        let Ok(mut map) = self.per_user.lock() else {
            // A poisoned map still shares: one semaphore for this call alone.
            return Arc::new(Semaphore::new(PER_USER_IN_FLIGHT));
        };
        // Users with nothing in flight are forgotten, so the map holds only active users.
        map.retain(|_, s| Arc::strong_count(s) > 1);
        map.entry(user.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(PER_USER_IN_FLIGHT)))
            .clone()
    }

    /// Waits for one of `user`'s [`PER_USER_IN_FLIGHT`] slots.
    pub async fn acquire(&self, user: &str) -> Option<OwnedSemaphorePermit> {
        self.semaphore(user).acquire_owned().await.ok()
    }

    /// Users with calls in flight or waiting.
    pub fn active(&self) -> usize {
        self.per_user.lock().map(|m| m.len()).unwrap_or_default()
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
    async fn one_user_holds_at_most_its_share_and_another_still_gets_in() {
        let shares = Shares::default();
        let mut held = Vec::new();
        for _ in 0..PER_USER_IN_FLIGHT {
            held.push(shares.acquire("mallory").await.expect("permit"));
        }
        let more = tokio::time::timeout(Duration::from_millis(50), shares.acquire("mallory"));
        assert!(more.await.is_err(), "mallory's share is used up");
        let other = tokio::time::timeout(Duration::from_millis(50), shares.acquire("alice"));
        assert!(
            other.await.is_ok_and(|p| p.is_some()),
            "alice still gets in"
        );
        drop(held);
        // Users with nothing in flight are forgotten.
        let _p = shares.acquire("carol").await;
        assert_eq!(shares.active(), 1);
    }
}
