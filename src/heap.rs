//! Giving freed heap memory back to the system. glibc keeps what a burst freed (the start-up
//! lists of 10,000 objects, a convergence's transient objects) mapped in its arenas, counted in
//! RSS, unless it lies at the very top of a heap; live objects left between the freed ones pin
//! the rest. `malloc_trim` hands every free page of every arena back. The `run` command calls
//! it every [`TRIM_EVERY`] (issue 36: at 10,000 Machines the live objects were some 45 MB of a
//! 138 MiB peak; see docs/design/performance.md).

use std::time::Duration;

/// How often `run` trims: often enough that a convergence's garbage does not pile up, rare
/// enough to cost nothing measurable (one walk of the free lists, off the async workers).
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Returns the free pages of every arena to the system; true when any was returned. Does
/// nothing (false) where the allocator is not glibc's.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointer and locks each arena while it walks it; it only
        // releases pages no allocation uses.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Trims every `period` until dropped.
pub async fn trim_every(period: Duration) {
    let mut every = tokio::time::interval(period);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let _ = tokio::task::spawn_blocking(trim).await;
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        let line = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .expect("VmRSS");
        line.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("kB")
    }

    /// What made the difference at 10,000 Machines: freed memory pinned between live objects
    /// stays in RSS until trimmed. 64 MiB in 2 KiB blocks, all but every 32nd freed: the heap's
    /// top stays in use, so glibc returns nothing by itself; a trim returns most of it.
    #[test]
    fn a_trim_returns_what_freed_objects_left_between_live_ones() {
        let (before, after) = std::thread::spawn(|| {
            let mut blocks: Vec<Option<Box<[u8; 2048]>>> = (0..32 * 1024)
                .map(|_| Some(Box::new([1u8; 2048])))
                .collect();
            for (i, b) in blocks.iter_mut().enumerate() {
                if i % 32 != 31 {
                    *b = None;
                }
            }
            let before = rss_kib();
            assert!(trim(), "something was returned");
            let after = rss_kib();
            drop(blocks);
            (before, after)
        })
        .join()
        .expect("thread");
        assert!(
            before.saturating_sub(after) > 32 * 1024,
            "RSS {before} KiB before the trim, {after} KiB after"
        );
    }
}
