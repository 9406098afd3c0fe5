//! Polling until something holds, for tests that watch a real control plane converge.

use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(100);

/// Polls `check` until it returns `Some`, or panics with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_with(timeout, what, String::new, check).await
}

/// Like [`eventually`], with `context()` (a log tail, say) in the panic message.
pub async fn eventually_with<T, F, Fut>(
    timeout: Duration,
    what: &str,
    context: impl Fn() -> String,
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}\n{}",
            context()
        );
        tokio::time::sleep(POLL).await;
    }
}
