//! What the reconciler remembers per Machine between reconciles, all forgotten together when
//! the Machine goes (its watch's delete event, the finalizer's completion), so no map grows
//! with Machines that were deleted.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::derived_secrets::DerivedSecrets;

#[derive(Default)]
pub struct PerMachine {
    /// Consecutive failures (`namespace/name`), for the backoff.
    pub failures: Mutex<HashMap<String, u32>>,
    /// The derived cloud-init Secrets as last applied or read.
    pub derived_secrets: DerivedSecrets,
    /// When this process last wrote each Machine's status (paces progress-only writes).
    pub status_writes: Mutex<HashMap<String, Instant>>,
}

impl PerMachine {
    /// Forgets everything about the Machine `key` (`namespace/name`).
    pub fn forget(&self, key: &str) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(key);
        }
        self.derived_secrets.forget(key);
        if let Ok(mut w) = self.status_writes.lock() {
            w.remove(key);
        }
    }

    /// Keeps only what belongs to Machines `live` says exist (after a re-list, whose deletions
    /// come as no event).
    pub fn retain(&self, live: impl Fn(&str) -> bool) {
        if let Ok(mut f) = self.failures.lock() {
            f.retain(|k, _| live(k));
        }
        self.derived_secrets.retain(&live);
        if let Ok(mut w) = self.status_writes.lock() {
            w.retain(|k, _| live(k));
        }
    }

    pub fn last_status_write(&self, key: &str) -> Option<Instant> {
        self.status_writes.lock().ok()?.get(key).copied()
    }

    pub fn status_written(&self, key: &str, at: Instant) {
        if let Ok(mut w) = self.status_writes.lock() {
            w.insert(key.to_owned(), at);
        }
    }

    /// Entries held, over every map (for tests and the prune's log).
    pub fn len(&self) -> usize {
        let failures = self.failures.lock().map(|f| f.len()).unwrap_or(0);
        let writes = self.status_writes.lock().map(|w| w.len()).unwrap_or(0);
        failures + writes + self.derived_secrets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconciler::store::derived_secrets::Known;

    fn filled(keys: &[&str]) -> PerMachine {
        let p = PerMachine::default();
        for k in keys {
            p.failures.lock().unwrap().insert((*k).to_owned(), 3);
            p.derived_secrets.remember(k, "uid", Known::Absent);
            p.status_written(k, Instant::now());
        }
        p
    }

    #[test]
    fn a_deleted_machine_leaves_nothing_behind() {
        let p = filled(&["ns/a", "ns/b"]);
        assert_eq!(p.len(), 6);
        p.forget("ns/a");
        assert_eq!(p.len(), 3);
        assert!(p.last_status_write("ns/a").is_none());
        assert!(p.derived_secrets.recall("ns/a", "uid").is_none());
        assert!(p.last_status_write("ns/b").is_some());
    }

    #[test]
    fn a_relist_prunes_machines_gone_meanwhile() {
        let p = filled(&["ns/a", "ns/b", "ns/c"]);
        p.retain(|k| k == "ns/b");
        assert_eq!(p.len(), 3);
        assert!(p.last_status_write("ns/b").is_some());
    }
}
