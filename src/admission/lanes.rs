//! Where admission work runs: off the async workers, a bounded number at a time.
//!
//! Decoding and deciding are CPU work. On the async workers, a few large reviews would stall
//! probes, the leader's Lease renewal and the reconciler with them, so every decision runs on a
//! blocking thread. Requests wait for a permit in one of two lanes chosen by their declared
//! size: Machines are small, so large bodies (hostile ones among them) queue among themselves
//! and cannot take the small lane's permits. A small body is read before its permit is taken,
//! so a slow sender holds no permit; a large one only once it holds the large lane's permit, so
//! at most that many large bodies are in memory. How long a body may take is the server's
//! per-request deadline. A request that cannot get a permit in time, or whose decision runs past
//! its deadline, is answered 503 at once: kube-apiserver reports that to the user instead of
//! waiting out its own timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

/// Bodies up to this size take the small lane. A Machine at every array's limit, with its
/// oldObject and managedFields, stays below it; the webhook listener's connection cap times this
/// bounds the memory of small bodies being read.
pub const SMALL_BODY_BYTES: usize = 128 * 1024;
/// kube-apiserver's own limit for a request body.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Permits and deadlines; [`Lanes::default`] is what the server runs with.
#[derive(Debug, Clone, Copy)]
pub struct LaneSettings {
    /// Small requests decided at once.
    pub small: usize,
    /// Large requests read and decided at once: each holds up to 3 MiB of body and its decoding.
    pub large: usize,
    /// How long a request waits for a permit.
    pub wait: Duration,
    /// How long a decision may take before the caller is told to retry (under the webhooks'
    /// 5 s `timeoutSeconds`, so the user sees our message rather than a timeout).
    pub decide: Duration,
    /// Bytes per second of large bodies, over all large permits: a large permit is held for at
    /// least `body length / large_rate`. Machines are small, so this slows only the senders of
    /// large bodies, and bounds the CPU they take from everything else (reading, decrypting,
    /// scanning and decoding 3 MiB costs milliseconds, and senders can repeat it at once).
    pub large_rate: usize,
}

impl Default for LaneSettings {
    fn default() -> Self {
        LaneSettings {
            small: 8,
            large: 1,
            wait: Duration::from_secs(2),
            decide: Duration::from_secs(4),
            large_rate: 16 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Lanes {
    small: Arc<Semaphore>,
    large: Arc<Semaphore>,
    settings: LaneSettings,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes::new(LaneSettings::default())
    }
}

impl Lanes {
    pub fn new(settings: LaneSettings) -> Self {
        Lanes {
            small: Arc::new(Semaphore::new(settings.small.max(1))),
            large: Arc::new(Semaphore::new(settings.large.max(1))),
            settings,
        }
    }

    /// Reads `body` and runs `work` on it on a blocking thread, within this lane's permits and
    /// deadlines; `declared` is the request's Content-Length. `Err` is the answer to give when
    /// the work could not run in time.
    pub async fn run<T, F>(
        &self,
        declared: Option<usize>,
        body: Body,
        work: F,
    ) -> Result<T, Response>
    where
        T: Send + 'static,
        F: FnOnce(Bytes) -> T + Send + 'static,
    {
        let s = &self.settings;
        let started = tokio::time::Instant::now();
        let wait =
            |lane: &Arc<Semaphore>| tokio::time::timeout(s.wait, lane.clone().acquire_owned());
        let (permit, bytes, hold) = match declared {
            Some(n) if n <= SMALL_BODY_BYTES => {
                let Ok(bytes) = axum::body::to_bytes(body, SMALL_BODY_BYTES).await else {
                    return Err(too_large(SMALL_BODY_BYTES));
                };
                let Ok(Ok(permit)) = wait(&self.small).await else {
                    return Err(busy(s.wait));
                };
                (permit, bytes, Duration::ZERO)
            }
            _ => {
                let Ok(Ok(permit)) = wait(&self.large).await else {
                    return Err(busy(s.wait));
                };
                let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
                    return Err(too_large(MAX_BODY_BYTES));
                };
                let hold = Duration::from_secs_f64(bytes.len() as f64 / s.large_rate.max(1) as f64);
                (permit, bytes, hold)
            }
        };
        // The permit goes with the work: a decision past its deadline still holds it until it
        // ends, so the number of decisions running never exceeds the permits. A large body's
        // permit is kept to its share of `large_rate`, on a timer rather than a thread.
        let task = tokio::task::spawn_blocking(move || {
            let done = work(bytes);
            let release = started + hold;
            if tokio::time::Instant::now() < release {
                tokio::runtime::Handle::current().spawn(async move {
                    tokio::time::sleep_until(release).await;
                    drop(permit);
                });
            } else {
                drop(permit);
            }
            done
        });
        match tokio::time::timeout(s.decide, task).await {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "admission decision failed");
                Err(StatusCode::INTERNAL_SERVER_ERROR.into_response())
            }
            Err(_) => Err(unavailable("the decision did not finish in time")),
        }
    }
}

fn busy(wait: Duration) -> Response {
    unavailable(&format!(
        "no admission capacity free within {}s",
        wait.as_secs_f32()
    ))
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
mod tests {
    use super::*;

    fn lanes(large_rate: usize) -> Lanes {
        Lanes::new(LaneSettings {
            wait: Duration::from_millis(150),
            large_rate,
            ..LaneSettings::default()
        })
    }

    async fn decide(lanes: &Lanes, len: usize) -> Result<usize, StatusCode> {
        let body = Body::from(vec![b' '; len]);
        lanes
            .run(Some(len), body, |b| b.len())
            .await
            .map_err(|r| r.status())
    }

    /// A large body holds the large lane for its share of the rate; small ones never wait on it.
    #[tokio::test(start_paused = true)]
    async fn large_bodies_share_a_byte_rate_and_small_ones_pass() {
        let big = SMALL_BODY_BYTES + 1;
        // 1 s per large body at this rate.
        let lanes = lanes(big);
        assert_eq!(decide(&lanes, big).await, Ok(big));
        assert_eq!(
            decide(&lanes, big).await,
            Err(StatusCode::SERVICE_UNAVAILABLE),
            "a second large body within the first one's second waits past `wait`"
        );
        assert_eq!(decide(&lanes, 100).await, Ok(100), "the small lane is free");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            decide(&lanes, big).await,
            Ok(big),
            "free again after its share"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_rate_to_keep_the_large_lane_frees_at_once() {
        let big = SMALL_BODY_BYTES + 1;
        let lanes = lanes(usize::MAX);
        for _ in 0..3 {
            assert_eq!(decide(&lanes, big).await, Ok(big));
        }
    }
}
