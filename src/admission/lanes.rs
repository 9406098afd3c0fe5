//! Where admission work runs: a bounded number at a time, off the async workers unless small.
//!
//! Decoding and deciding are CPU work. On the async workers, a few large reviews would stall
//! probes, the leader's Lease renewal and the reconciler with them, so every decision of a body
//! over [`LaneSettings::inline`] (8 KiB) runs on a blocking thread. One within it (a Machine's
//! CREATE is 1-3 KB) is decided where it was read, within a small permit and the same budget:
//! its cost is bounded by its size (the costliest such body well under a millisecond, a typical
//! CREATE 15-25 µs), and handing it to a blocking thread and back (two thread wake-ups, and
//! allocations freed on another thread than made them) more than doubled the CPU each small
//! admission took. Requests wait for a permit in one of two lanes chosen by their declared
//! size: Machines are small, so large bodies (hostile ones among them) queue among themselves
//! and cannot take the small lane's permits. A small body is read before its permit is taken,
//! so a slow sender holds no permit; a large one only once it holds the large lane's permit, so
//! at most that many large bodies are in memory, read at the lane's byte rate and decided at the
//! lowest CPU priority (`low_priority`). How long a body may take is the server's
//! per-request deadline. A request that cannot get a permit in time, or whose decision runs past
//! its deadline, is answered 503 at once: kube-apiserver reports that to the user instead of
//! waiting out its own timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{FutureExt, TryFutureExt};
use http_body_util::BodyExt;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::low_priority::LowPriority;

/// Bodies up to this size take the small lane. A Machine at every array's limit, with its
/// oldObject and managedFields, stays below it; the webhook listener's connection cap times this
/// bounds the memory of small bodies being read.
pub const SMALL_BODY_BYTES: usize = 128 * 1024;
/// kube-apiserver's own limit for a request body.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Small bodies up to this size are decided on the async worker that read them: the costliest
/// (as many disks as fit, each failing three rules) took 0.5-0.7 ms on a loaded 2-core machine
/// (`cargo bench --bench admission_handler`), a typical Machine's CREATE 15-25 µs.
pub const INLINE_BODY_BYTES: usize = 8 * 1024;

/// Permits and deadlines; [`Lanes::default`] is what the server runs with.
#[derive(Debug, Clone, Copy)]
pub struct LaneSettings {
    /// Small requests decided at once.
    pub small: usize,
    /// Large requests read and decided at once: each holds up to 3 MiB of body and its decoding.
    pub large: usize,
    /// How long a request waits for a permit.
    pub wait: Duration,
    /// The whole answer's budget, from the request's arrival: the wait for a permit, reading
    /// the body, the decision and the access check. Past it the caller is told to retry; under
    /// the webhooks' 5 s `timeoutSeconds`, so the user reads our message rather than a timeout.
    pub answer_within: Duration,
    /// Bytes per second of large bodies, over all large permits: a large permit is held for at
    /// least `body length / large_rate`. Machines are small, so this slows only the senders of
    /// large bodies, and bounds the CPU they take from everything else (reading, decrypting,
    /// scanning and decoding 3 MiB costs milliseconds, and senders can repeat it at once).
    pub large_rate: usize,
    /// Small bodies up to this many bytes are decided on the async worker that read them, with
    /// their permit, if their budget is not spent; larger ones on a blocking thread (0: every
    /// body there).
    pub inline: usize,
}

impl Default for LaneSettings {
    fn default() -> Self {
        LaneSettings {
            small: 8,
            large: 1,
            wait: Duration::from_secs(2),
            answer_within: Duration::from_secs(4),
            large_rate: 4 * 1024 * 1024,
            inline: INLINE_BODY_BYTES,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Lanes {
    small: Arc<Semaphore>,
    large: Arc<Semaphore>,
    /// Where large bodies are decided: threads at the lowest CPU priority (`None` if they could
    /// not be started: tokio's blocking pool then, at normal priority).
    low_priority: Option<Arc<LowPriority>>,
    settings: LaneSettings,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes::new(LaneSettings::default())
    }
}

impl Lanes {
    pub fn new(settings: LaneSettings) -> Self {
        let low_priority = match LowPriority::start(settings.large) {
            Ok(threads) => Some(Arc::new(threads)),
            Err(e) => {
                tracing::warn!(error = %e, "large admission lane: no threads of its own; using the blocking pool");
                None
            }
        };
        Lanes {
            small: Arc::new(Semaphore::new(settings.small.max(1))),
            large: Arc::new(Semaphore::new(settings.large.max(1))),
            low_priority,
            settings,
        }
    }

    /// When a request arriving now must be answered by.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.settings.answer_within
    }

    /// When a request that arrived at `arrived` (None: now) must be answered by.
    pub fn deadline_from(&self, arrived: Option<Instant>) -> Instant {
        arrived.unwrap_or_else(Instant::now) + self.settings.answer_within
    }

    /// Reads `body` and runs `work` on it on a blocking thread, within this lane's permits and
    /// by `deadline` (see [`Lanes::deadline`]); `declared` is the request's Content-Length.
    /// `Err` is the answer to give when the work could not run in time.
    pub async fn run<T, F>(
        &self,
        declared: Option<usize>,
        body: Body,
        deadline: Instant,
        work: F,
    ) -> Result<T, Response>
    where
        T: Send + 'static,
        F: FnOnce(Bytes) -> T + Send + 'static,
    {
        let s = &self.settings;
        let wait_until = deadline.min(Instant::now() + s.wait);
        let wait = |lane: &Arc<Semaphore>| {
            tokio::time::timeout_at(wait_until, lane.clone().acquire_owned())
        };
        // A large body's permit is held until `release`: counted from when it was taken.
        let (permit, bytes, release) = match declared {
            Some(n) if n <= SMALL_BODY_BYTES => {
                let Ok(bytes) = axum::body::to_bytes(body, SMALL_BODY_BYTES).await else {
                    return Err(unread(too_large(SMALL_BODY_BYTES)));
                };
                let Ok(Ok(permit)) = wait(&self.small).await else {
                    return Err(busy());
                };
                (permit, bytes, None)
            }
            _ => {
                let Ok(Ok(permit)) = wait(&self.large).await else {
                    return Err(unread(busy()));
                };
                let taken = Instant::now();
                let Ok(bytes) = read_paced(body, MAX_BODY_BYTES, s.large_rate).await else {
                    return Err(unread(too_large(MAX_BODY_BYTES)));
                };
                let share = bytes.len() as f64 / s.large_rate.max(1) as f64;
                (permit, bytes, Some(taken + Duration::from_secs_f64(share)))
            }
        };
        if release.is_none() && bytes.len() <= s.inline {
            // Bounded by its size: cheaper decided here than handed to another thread.
            if Instant::now() >= deadline {
                return Err(too_late());
            }
            let done = work(bytes);
            drop(permit);
            return Ok(done);
        }
        // The permit goes with the work: a decision past its deadline still holds it until it
        // ends, so the number of decisions running never exceeds the permits. A large body's
        // permit is kept to its share of `large_rate`, on a timer rather than a thread.
        let runtime = tokio::runtime::Handle::current();
        let job = move || {
            let done = work(bytes);
            if let Some(release) = release.filter(|r| Instant::now() < *r) {
                runtime.spawn(async move {
                    tokio::time::sleep_until(release).await;
                    drop(permit);
                });
            } else {
                drop(permit);
            }
            done
        };
        let task = match (&self.low_priority, release.is_some()) {
            (Some(low), true) => low.run(job).map_err(|e| e.to_string()).boxed(),
            _ => tokio::task::spawn_blocking(job)
                .map_err(|e| e.to_string())
                .boxed(),
        };
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "admission decision failed");
                Err(StatusCode::INTERNAL_SERVER_ERROR.into_response())
            }
            Err(_) => Err(too_late()),
        }
    }
}

/// Reads `body` (at most `limit` bytes) no faster than `rate` bytes per second: the decryption
/// and copying of a large body come in small steps spread over its share, never as one burst
/// that holds an async worker while normal requests wait behind it.
async fn read_paced(body: Body, limit: usize, rate: usize) -> Result<Bytes, ()> {
    let started = Instant::now();
    let mut body = body;
    let mut read = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(drop)?.into_data() else {
            continue; // Trailers.
        };
        if read.len() + data.len() > limit {
            return Err(());
        }
        read.extend_from_slice(&data);
        let due = Duration::from_secs_f64(read.len() as f64 / rate.max(1) as f64);
        tokio::time::sleep_until(started + due).await;
    }
    Ok(Bytes::from(read))
}

/// An answer given before the body was read in full. hyper then closes the connection, and
/// says so (`Connection: close`) only if the answer does: without it a client may put the
/// closing connection back in its pool and lose its next request on it.
fn unread(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

fn too_late() -> Response {
    unavailable("the decision did not finish in time")
}

fn busy() -> Response {
    unavailable("no admission capacity free in time")
}

fn unavailable(why: &str) -> Response {
    status(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        &format!("admission webhook is saturated: {why}; retry"),
    )
}

fn too_large(limit: usize) -> Response {
    status(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        &format!(
            "request body could not be read in full: larger than {limit} bytes, or the \
             connection failed"
        ),
    )
}

/// A Kubernetes Status body with its HTTP code.
pub fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    let mut response = (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    if code == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}

#[cfg(test)]
mod tests;
