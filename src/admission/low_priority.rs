//! The large lane's threads, at the lowest CPU priority (nice 19).
//!
//! No Machine author's normal request is large (see `lanes::SMALL_BODY_BYTES`): whoever sends
//! large bodies competes for the CPU with every normal admission, the probes, the Lease renewal
//! and the reconciler. At nice 19 the kernel gives that work what the rest leaves, and an idle
//! machine still finishes it at full speed. (Linux keeps the nice value per thread, and a thread
//! may not raise it again, hence threads of their own rather than tokio's blocking pool.)

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The nice value of these threads.
pub const NICE: i32 = 19;

type Job = Box<dyn FnOnce() + Send + 'static>;

#[derive(Debug)]
pub struct LowPriority {
    jobs: SyncSender<Job>,
}

impl LowPriority {
    /// Starts `threads` threads; each takes one job at a time.
    pub fn start(threads: usize) -> std::io::Result<Self> {
        let threads = threads.max(1);
        let (jobs, queue) = sync_channel::<Job>(threads);
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..threads {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("admission-large-{i}"))
                .spawn(move || {
                    let tid = rustix::thread::gettid();
                    if let Err(e) = rustix::process::setpriority_process(Some(tid), NICE) {
                        tracing::warn!(error = %e, "large admission lane: cannot lower its priority");
                    }
                    loop {
                        let job = match queue.lock() {
                            Ok(q) => q.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else { return }; // The server is gone.
                        // A panicking job drops its answer channel (the caller answers 500);
                        // the thread stays for the next.
                        let _ = catch_unwind(AssertUnwindSafe(job));
                    }
                })?;
        }
        Ok(LowPriority { jobs })
    }

    /// Runs `work` on one of the threads. The receiver fails if the work panicked, or if every
    /// thread is busy and the queue full (the lane's permits keep it from filling).
    pub fn run<T, F>(&self, work: F) -> oneshot::Receiver<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (answer, receiver) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = answer.send(work());
        });
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => tracing::error!("large admission lane: queue full"),
            Err(TrySendError::Disconnected(_)) => {
                tracing::error!("large admission lane: no threads left")
            }
        }
        receiver
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_at_the_lowest_priority_and_survives_a_panic() {
        let pool = LowPriority::start(1).expect("threads");
        let nice = pool
            .run(|| rustix::process::getpriority_process(Some(rustix::thread::gettid())))
            .await
            .expect("answer")
            .expect("getpriority");
        assert_eq!(nice, NICE);
        assert!(pool.run(|| panic!("hostile")).await.is_err());
        assert_eq!(pool.run(|| 7).await.expect("the thread survived"), 7);
    }
}
