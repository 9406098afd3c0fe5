//! The Kubernetes Status of a denial: 422 Invalid with its causes, 400, 413, 500 and 503.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

use crate::api::names::GROUP;
use crate::machine::FieldError;

use super::limits::{Exceeded, MAX_CAUSE_BYTES, MAX_CAUSES, MAX_MESSAGE_BYTES, truncate};

const KIND: &str = "Machine";

fn failure(code: i32, reason: &str, message: String, details: Option<StatusDetails>) -> Status {
    Status {
        code: Some(code),
        reason: Some(reason.to_owned()),
        message: Some(message),
        status: Some("Failure".to_owned()),
        details,
        ..Default::default()
    }
}

/// 422 Invalid with one cause per field error, like `apierrors.NewInvalid`: the first
/// [`MAX_CAUSES`], then one cause counting the rest; every cause and the message bounded.
pub fn invalid(name: &str, errors: &[FieldError]) -> Status {
    invalid_kind(KIND, name, errors)
}

/// [`invalid`] for a kind of this group other than Machine.
pub fn invalid_kind(kind: &str, name: &str, errors: &[FieldError]) -> Status {
    let shown = &errors[..errors.len().min(MAX_CAUSES)];
    let hidden = errors.len() - shown.len();
    let mut causes: Vec<StatusCause> = shown
        .iter()
        .map(|e| StatusCause {
            field: Some(e.field.clone()),
            message: Some(truncate(&e.body(), MAX_CAUSE_BYTES).into_owned()),
            reason: Some(e.kind.cause_reason().to_owned()),
        })
        .collect();
    let more = (hidden > 0).then(|| format!("and {hidden} more errors not shown"));
    if let Some(more) = &more {
        causes.push(StatusCause {
            field: Some("spec".to_owned()),
            message: Some(more.clone()),
            reason: Some("FieldValueInvalid".to_owned()),
        });
    }
    let listed = shown
        .iter()
        .map(|e| {
            let body = e.body();
            format!("{}: {}", e.field, truncate(&body, MAX_CAUSE_BYTES))
        })
        .chain(more)
        .collect::<Vec<_>>();
    let joined = match listed.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let details = StatusDetails {
        name: (!name.is_empty()).then(|| name.to_owned()),
        group: Some(GROUP.to_owned()),
        kind: Some(kind.to_owned()),
        causes: Some(causes),
        ..Default::default()
    };
    failure(
        422,
        "Invalid",
        truncate(
            &format!("{kind}.{GROUP} {name:?} is invalid: {joined}"),
            MAX_MESSAGE_BYTES,
        )
        .into_owned(),
        Some(details),
    )
}

/// 413 for a review over [`super::limits`]: refused before it is decoded.
pub fn too_large(exceeded: Exceeded) -> Status {
    failure(
        413,
        "RequestEntityTooLarge",
        format!("{KIND}.{GROUP} is too large to admit: {exceeded}"),
        None,
    )
}

pub fn bad_request(message: &str) -> Status {
    failure(400, "BadRequest", message.to_owned(), None)
}

pub fn internal(message: &str) -> Status {
    failure(500, "InternalError", message.to_owned(), None)
}

/// 503 for a request that cannot be decided yet (the replica has not read what it needs).
pub fn unavailable(message: &str) -> Status {
    failure(503, "ServiceUnavailable", message.to_owned(), None)
}
