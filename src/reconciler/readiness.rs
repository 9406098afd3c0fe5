//! The reconciler's own readiness: have its watch caches filled? `run` combines it with the
//! leader's state for `/readyz` (a follower has no caches to wait for).

use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Default)]
pub struct State {
    synced: AtomicBool,
}

impl State {
    pub fn caches_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
    pub(crate) fn set_caches_synced(&self, v: bool) {
        self.synced.store(v, Ordering::Release);
    }
}
