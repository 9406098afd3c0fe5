//! Where admission work runs: off the async workers, a bounded number at a time.
//!
//! Decoding and deciding are CPU work. On the async workers, a few large reviews would stall
//! probes, the leader's Lease renewal and the reconciler with them, so every decision runs on a
//! blocking thread. Requests wait for a permit in one of two lanes chosen by their declared
//! size: Machines are small, so large bodies (hostile ones among them) queue among themselves
//! and cannot take the small lane's permits. A request that cannot get a permit, or whose body
//! or decision runs past its deadline, is answered 503 at once: kube-apiserver reports that to
//! the user instead of waiting out its own timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

/// Bodies up to this size take the small lane. A Machine at every array's limit, with its
/// oldObject and managedFields, stays well below it.
pub const SMALL_BODY_BYTES: usize = 256 * 1024;
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
    /// How long a body may take to arrive once a permit is held.
    pub read: Duration,
    /// How long a decision may take before the caller is told to retry (under the webhooks'
    /// 5 s `timeoutSeconds`, so the user sees our message rather than a timeout).
    pub decide: Duration,
}

impl Default for LaneSettings {
    fn default() -> Self {
        LaneSettings {
            small: 8,
            large: 1,
            wait: Duration::from_secs(2),
            read: Duration::from_secs(2),
            decide: Duration::from_secs(4),
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
    /// deadlines; `declared` is the request's Content-Length.
    pub async fn run<F>(&self, declared: Option<usize>, body: Body, work: F) -> Response
    where
        F: FnOnce(Bytes) -> Response + Send + 'static,
    {
        let (lane, limit) = match declared {
            Some(n) if n <= SMALL_BODY_BYTES => (&self.small, SMALL_BODY_BYTES),
            _ => (&self.large, MAX_BODY_BYTES),
        };
        let s = &self.settings;
        let permit = match tokio::time::timeout(s.wait, lane.clone().acquire_owned()).await {
            Ok(Ok(permit)) => permit,
            _ => {
                return busy(&format!(
                    "no admission capacity free within {}s",
                    s.wait.as_secs_f32()
                ));
            }
        };
        let bytes = match tokio::time::timeout(s.read, axum::body::to_bytes(body, limit)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(_)) => return too_large(limit),
            Err(_) => return busy("the request body did not arrive in time"),
        };
        // The permit goes with the work: a decision past its deadline still holds it until it
        // ends, so the number of decisions running never exceeds the permits.
        let task = tokio::task::spawn_blocking(move || {
            let response = work(bytes);
            drop(permit);
            response
        });
        match tokio::time::timeout(s.decide, task).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "admission decision failed");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
            Err(_) => busy("the decision did not finish in time"),
        }
    }
}

fn busy(why: &str) -> Response {
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
        &format!("request body is larger than {limit} bytes (or than its Content-Length)"),
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
