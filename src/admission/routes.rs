//! The HTTP face of the webhooks: decode, decide, encode. Nothing here makes a decision.

use std::sync::Arc;
use std::time::Instant;

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use crate::telemetry::Metrics;
use crate::telemetry::metrics::{Webhook, WebhookReason, WebhookResult};

use super::decide::{bad_request, too_large};
use super::lanes::{self, Lanes};
use super::limits::{MAX_LOGGED_BYTES, truncate};
use super::review::{self, DecodeError, Request, Review, Verdict};
use super::{
    Admission, MACHINE_CLASS_VALIDATE_PATH, MUTATE_PATH, NETWORK_VALIDATE_PATH,
    RESTORE_VALIDATE_PATH, SNAPSHOT_VALIDATE_PATH, VALIDATE_PATH,
};

#[derive(Clone)]
struct Shared {
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    lanes: Lanes,
}

/// The webhook routes, with metrics of their own (for tests and the standalone server's
/// callers that do not expose metrics).
pub fn router(admission: Arc<Admission>) -> Router {
    router_with_metrics(admission, Arc::new(Metrics::new()))
}

pub fn router_with_metrics(admission: Arc<Admission>, metrics: Arc<Metrics>) -> Router {
    router_with(admission, metrics, Lanes::default())
}

pub fn router_with(admission: Arc<Admission>, metrics: Arc<Metrics>, lanes: Lanes) -> Router {
    Router::new()
        .route(MUTATE_PATH, post(mutate))
        .route(VALIDATE_PATH, post(validate))
        .route(NETWORK_VALIDATE_PATH, post(validate_network))
        .route(MACHINE_CLASS_VALIDATE_PATH, post(validate_class))
        .route(SNAPSHOT_VALIDATE_PATH, post(validate_snapshot))
        .route(RESTORE_VALIDATE_PATH, post(validate_restore))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(Shared {
            admission,
            metrics,
            lanes,
        })
}

async fn mutate(State(shared): State<Shared>, request: axum::extract::Request) -> Response {
    serve(
        shared,
        "mutate",
        request,
        Admission::mutate,
        AccessCheck::PinSources,
    )
    .await
}

async fn validate(State(shared): State<Shared>, request: axum::extract::Request) -> Response {
    serve(
        shared,
        "validate",
        request,
        Admission::validate,
        AccessCheck::AsAuthor,
    )
    .await
}

async fn validate_network(
    State(shared): State<Shared>,
    request: axum::extract::Request,
) -> Response {
    let webhook = "validate-networkconfiguration";
    serve(
        shared,
        webhook,
        request,
        Admission::validate_network,
        AccessCheck::NetworkAuthor,
    )
    .await
}

async fn validate_class(State(shared): State<Shared>, request: axum::extract::Request) -> Response {
    let webhook = "validate-machineclass";
    serve(
        shared,
        webhook,
        request,
        Admission::validate_class,
        AccessCheck::Nothing,
    )
    .await
}

async fn validate_snapshot(
    State(shared): State<Shared>,
    request: axum::extract::Request,
) -> Response {
    let webhook = "validate-machinesnapshot";
    serve(
        shared,
        webhook,
        request,
        Admission::validate_snapshot,
        AccessCheck::SnapshotAuthor,
    )
    .await
}

async fn validate_restore(
    State(shared): State<Shared>,
    request: axum::extract::Request,
) -> Response {
    let webhook = "validate-machinerestore";
    serve(
        shared,
        webhook,
        request,
        Admission::validate_restore,
        AccessCheck::RestoreAuthor,
    )
    .await
}

/// What an allowed review then asks kube-apiserver (src/access/): nothing, where DataSources
/// point, or the author's rights.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AccessCheck {
    /// The mutating webhook: fills clones from their source (`super::clones`), then pins what
    /// each DataSource points to (`super::pins`).
    PinSources,
    AsAuthor,
    /// A NetworkConfiguration's author may create the attachment it makes.
    NetworkAuthor,
    /// A MachineClass refers to nothing.
    Nothing,
    /// A MachineSnapshot's author may get its Machine, which exists.
    SnapshotAuthor,
    /// A MachineRestore's author may update its Machine; the Machine and a snapshot of it exist.
    RestoreAuthor,
}

/// What the blocking part hands back: a decoded review and its verdict, or the answer to a
/// body that did not decode.
enum Decided {
    Review(Box<(Review, Verdict)>),
    Rejected(Box<(Response, &'static str)>),
}

/// One review: read, decoded and decided on a blocking thread within its lane; then, when the
/// rules allow it, the access check as its author, which waits on kube-apiserver (no permit held);
/// then encoded.
async fn serve(
    shared: Shared,
    webhook: &'static str,
    request: axum::extract::Request,
    decide: fn(&Admission, &Request) -> Verdict,
    access: AccessCheck,
) -> Response {
    let start = Instant::now();
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let admission = shared.admission.clone();
    // One budget for the whole answer, from the request's arrival at the listener (its wait
    // for an in-flight slot included): the lanes and the access check share it.
    let arrived = request.extensions().get::<crate::tls::streams::Arrived>();
    let deadline = shared.lanes.deadline_from(arrived.map(|a| a.0));
    let decided = shared
        .lanes
        .run(
            declared,
            request.into_body(),
            deadline,
            move |body| match decode_or_reject(&body) {
                Ok(review) => {
                    let verdict = decide(&admission, &review.request);
                    Decided::Review(Box::new((review, verdict)))
                }
                Err(rejected) => Decided::Rejected(rejected),
            },
        )
        .await;
    let (response, result) = match decided {
        Err(unavailable) => (unavailable, "error"),
        Ok(Decided::Rejected(rejected)) => *rejected,
        Ok(Decided::Review(decided)) => {
            let (review, verdict) = *decided;
            let verdict = match (access, shared.admission.access()) {
                (AccessCheck::AsAuthor, Some(reviewer)) => {
                    super::access::check(reviewer, &review.request, verdict, deadline).await
                }
                (AccessCheck::PinSources, Some(reviewer)) => {
                    let req = &review.request;
                    let admission = &shared.admission;
                    let verdict =
                        super::clones::expand(admission, reviewer, req, verdict, deadline).await;
                    super::pins::pin(reviewer, req, verdict, deadline).await
                }
                (AccessCheck::NetworkAuthor, Some(reviewer)) => {
                    super::access::check_network(reviewer, &review.request, verdict, deadline).await
                }
                (AccessCheck::SnapshotAuthor, Some(reviewer)) => {
                    let req = &review.request;
                    super::snapshot_access::check_snapshot(reviewer, req, verdict, deadline).await
                }
                (AccessCheck::PinSources, None) => {
                    super::clones::unfilled(&review.request, verdict)
                }
                (AccessCheck::RestoreAuthor, Some(reviewer)) => {
                    let req = &review.request;
                    super::snapshot_access::check_restore(reviewer, req, verdict, deadline).await
                }
                _ => verdict,
            };
            respond(&review, &verdict)
        }
    };
    record(&shared.metrics, webhook, start, result);
    if let Some(super::denials::Denial(reason)) = super::denials::of(&response) {
        let labels = WebhookReason { webhook, reason };
        shared
            .metrics
            .admission_denials
            .get_or_create(&labels)
            .inc();
    }
    response
}

fn record(metrics: &Metrics, webhook: &'static str, start: Instant, result: &'static str) {
    metrics
        .admission_duration
        .get_or_create(&Webhook { webhook })
        .observe(start.elapsed().as_secs_f64());
    metrics
        .admission_requests
        .get_or_create(&WebhookResult { webhook, result })
        .inc();
}

/// Decodes, decides and encodes one review, and says how it went (allowed, denied or error).
pub fn answer(body: &[u8], decide: impl FnOnce(&Request) -> Verdict) -> (Response, &'static str) {
    match decode_or_reject(body) {
        Ok(review) => {
            let verdict = decide(&review.request);
            respond(&review, &verdict)
        }
        Err(rejected) => *rejected,
    }
}

/// A review we cannot answer in kind (no uid, not JSON, wrong apiVersion) gets a 400 with a
/// Kubernetes Status saying why; one over the limits is denied in kind when its uid can be read.
fn decode_or_reject(body: &[u8]) -> Result<Review, Box<(Response, &'static str)>> {
    match review::decode(body) {
        Ok(review) => Ok(review),
        Err(DecodeError::Exceeded(exceeded)) => {
            tracing::warn!(%exceeded, bytes = body.len(), "refused an AdmissionReview over the limits");
            let status = too_large(exceeded);
            Err(Box::new(match review::identify(body) {
                Some((api_version, uid)) => {
                    encoded(&api_version, &uid, &Verdict::deny(status), "denied")
                }
                None => (
                    status_response(StatusCode::PAYLOAD_TOO_LARGE, &status),
                    "error",
                ),
            }))
        }
        Err(e) => {
            tracing::warn!(error = %e, "rejected an undecodable AdmissionReview");
            Err(Box::new((
                status_response(StatusCode::BAD_REQUEST, &bad_request(&e.to_string())),
                "error",
            )))
        }
    }
}

/// Logs a denial and encodes the verdict in the review's own apiVersion.
fn respond(review: &Review, verdict: &Verdict) -> (Response, &'static str) {
    if !verdict.allowed {
        let message = verdict
            .status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .unwrap_or_default();
        // `message` is the log line's own key: the denial reason goes under `reason`, cut to a
        // bounded length.
        let reason = truncate(message, MAX_LOGGED_BYTES);
        tracing::info!(uid = %review.request.uid, operation = %review.request.operation, name = %review.request.name, %reason, "denied");
    }
    let result = if verdict.allowed { "allowed" } else { "denied" };
    encoded(&review.api_version, &review.request.uid, verdict, result)
}

fn encoded(
    api_version: &str,
    uid: &str,
    verdict: &Verdict,
    result: &'static str,
) -> (Response, &'static str) {
    match review::encode(api_version, uid, verdict) {
        Ok(bytes) => (
            super::denials::mark(
                ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
                verdict,
            ),
            result,
        ),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode AdmissionReview response");
            (StatusCode::INTERNAL_SERVER_ERROR.into_response(), "error")
        }
    }
}

fn status_response(code: StatusCode, status: &Status) -> Response {
    lanes::status(
        code,
        status.reason.as_deref().unwrap_or_default(),
        status.message.as_deref().unwrap_or_default(),
    )
}

async fn method_not_allowed() -> Response {
    let msg = format!(
        "method not allowed: the webhooks take POST {MUTATE_PATH} and POST {VALIDATE_PATH}"
    );
    let status = Status {
        message: Some(msg),
        reason: Some("MethodNotAllowed".into()),
        ..Default::default()
    };
    let mut response = status_response(StatusCode::METHOD_NOT_ALLOWED, &status);
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    response
}

async fn not_found() -> Response {
    let msg = format!("not found: the webhooks are POST {MUTATE_PATH} and POST {VALIDATE_PATH}");
    status_response(
        StatusCode::NOT_FOUND,
        &Status {
            message: Some(msg),
            reason: Some("NotFound".into()),
            ..Default::default()
        },
    )
}

#[cfg(test)]
mod tests;
