//! The reconciler's own readiness: have its watch caches filled? `run` combines it with the
//! leader's state for `/readyz` (a follower has no caches to wait for).

use tokio::sync::watch;

#[derive(Debug)]
pub struct State {
    synced: watch::Sender<bool>,
}

impl Default for State {
    fn default() -> Self {
        State {
            synced: watch::Sender::new(false),
        }
    }
}

impl State {
    pub fn caches_synced(&self) -> bool {
        *self.synced.borrow()
    }
    pub(crate) fn set_caches_synced(&self, v: bool) {
        self.synced.send_replace(v);
    }
    /// Resolves once the caches are synced.
    pub(crate) async fn synced(&self) {
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = self.synced.subscribe().wait_for(|s| *s).await;
    }
}
