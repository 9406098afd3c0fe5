//! What this process wrote last, for the moment before the watch caches catch up with it.
//!
//! A reconcile triggered by the watch events of the previous reconcile's own writes may run
//! before the last of those events arrived, and would see a Machine without the status just
//! written, or no VM where one was just applied, and write again. Writes return the object with
//! its new resourceVersion; while the cache holds an older version (or none) and the write is
//! recent, the object written stands for the cached one. Comparing resourceVersions as numbers is
//! only ever used to skip a redundant write: a version that does not parse is never trusted.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a write stands in for the cache; watch events normally arrive within milliseconds.
pub const TRUST: Duration = Duration::from_secs(5);
/// Expired entries are swept after this many records.
const SWEEP_EVERY: usize = 512;

struct Entry<T> {
    version: u64,
    at: Instant,
    value: T,
    /// The watch has delivered this version (or a later one).
    seen: bool,
}

pub struct LastWrite<T> {
    trust: Duration,
    inner: Mutex<(HashMap<String, Entry<T>>, usize)>,
}

impl<T: Clone> Default for LastWrite<T> {
    fn default() -> Self {
        Self::new(TRUST)
    }
}

impl<T: Clone> LastWrite<T> {
    pub fn new(trust: Duration) -> Self {
        LastWrite {
            trust,
            inner: Mutex::new((HashMap::new(), 0)),
        }
    }

    /// Remembers `value`, written as `resource_version` (ignored when it is not a number).
    pub fn record(&self, key: String, resource_version: Option<&str>, value: T) {
        self.record_at(key, resource_version, value, Instant::now());
    }

    /// Our last write of `key` if the cache's copy (`cached_version`, `None` when the cache has
    /// none) is older and the write recent; otherwise `None`, and the entry is dropped.
    pub fn newer_than(&self, key: &str, cached_version: Option<&str>) -> Option<T> {
        self.newer_than_at(key, cached_version, Instant::now())
    }

    /// The watch delivered `key` at `resource_version`. Once it has delivered our write, an
    /// object missing from the cache was deleted since, rather than not seen yet. (The entry
    /// stays: a reconcile may still be working from a copy taken before.)
    pub fn observed(&self, key: &str, resource_version: Option<&str>) {
        let Some(seen) = resource_version.and_then(|v| v.parse::<u64>().ok()) else {
            return;
        };
        if let Ok(mut guard) = self.inner.lock()
            && let Some(e) = guard.0.get_mut(key)
            && seen >= e.version
        {
            e.seen = true;
        }
    }

    fn record_at(&self, key: String, resource_version: Option<&str>, value: T, now: Instant) {
        let Some(version) = resource_version.and_then(|v| v.parse::<u64>().ok()) else {
            return;
        };
        if let Ok(mut guard) = self.inner.lock() {
            let (map, count) = &mut *guard;
            *count += 1;
            if *count % SWEEP_EVERY == 0 {
                let trust = self.trust;
                map.retain(|_, e| now.duration_since(e.at) <= trust);
            }
            map.insert(
                key,
                Entry {
                    version,
                    at: now,
                    value,
                    seen: false,
                },
            );
        }
    }

    fn newer_than_at(&self, key: &str, cached_version: Option<&str>, now: Instant) -> Option<T> {
        let mut guard = self.inner.lock().ok()?;
        let map = &mut guard.0;
        let entry = map.get(key)?;
        let cached = cached_version.map(|v| v.parse::<u64>().ok());
        let stale_cache = match cached {
            None => !entry.seen, // not in the cache yet, unless deleted since
            Some(Some(c)) => c < entry.version,
            Some(None) => false, // not a number: trust the cache
        };
        if stale_cache && now.duration_since(entry.at) <= self.trust {
            Some(entry.value.clone())
        } else {
            map.remove(key);
            None
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().map(|g| g.0.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stands_in_while_the_cache_is_older() {
        let w = LastWrite::new(TRUST);
        let t0 = Instant::now();
        w.record_at("ns/a".into(), Some("10"), "ours", t0);
        assert_eq!(w.newer_than_at("ns/a", Some("9"), t0), Some("ours"));
        assert_eq!(
            w.newer_than_at("ns/a", None, t0),
            Some("ours"),
            "not in the cache yet"
        );
        assert_eq!(w.newer_than_at("ns/b", Some("1"), t0), None);
    }

    #[test]
    fn the_cache_wins_once_it_caught_up() {
        let w = LastWrite::new(TRUST);
        let t0 = Instant::now();
        w.record_at("k".into(), Some("10"), 1, t0);
        assert_eq!(w.newer_than_at("k", Some("10"), t0), None);
        assert_eq!(w.len(), 0, "forgotten");
        w.record_at("k".into(), Some("10"), 1, t0);
        assert_eq!(
            w.newer_than_at("k", Some("12"), t0),
            None,
            "someone wrote after us"
        );
    }

    #[test]
    fn after_the_watch_saw_our_write_a_missing_object_was_deleted() {
        let w = LastWrite::new(TRUST);
        let t0 = Instant::now();
        w.record_at("k".into(), Some("10"), 1, t0);
        w.observed("k", Some("9"));
        assert_eq!(
            w.newer_than_at("k", None, t0),
            Some(1),
            "an older event changes nothing"
        );
        w.observed("k", Some("10"));
        // A copy taken before the event still gets our write ...
        assert_eq!(w.newer_than_at("k", Some("9"), t0), Some(1));
        // ... but an empty cache now means deleted, so the object is made again.
        assert_eq!(w.newer_than_at("k", None, t0), None);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn only_for_a_short_time() {
        let w = LastWrite::new(Duration::from_secs(5));
        let t0 = Instant::now();
        w.record_at("k".into(), Some("10"), 1, t0);
        assert_eq!(
            w.newer_than_at("k", None, t0 + Duration::from_secs(6)),
            None
        );
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn versions_that_are_not_numbers_are_never_trusted() {
        let w = LastWrite::new(TRUST);
        let t0 = Instant::now();
        w.record_at("k".into(), Some("abc"), 1, t0);
        assert_eq!(w.newer_than_at("k", None, t0), None);
        w.record_at("k".into(), Some("10"), 1, t0);
        assert_eq!(w.newer_than_at("k", Some("x"), t0), None);
    }

    #[test]
    fn expired_entries_are_swept() {
        let w = LastWrite::new(Duration::from_secs(1));
        let t0 = Instant::now();
        for i in 0..SWEEP_EVERY - 1 {
            w.record_at(format!("k{i}"), Some("1"), (), t0);
        }
        w.record_at("last".into(), Some("1"), (), t0 + Duration::from_secs(2));
        assert_eq!(w.len(), 1);
    }
}
