//! The refusals the author checks answer with: 403 Forbidden worded like the API server's field
//! errors (a cause per refused permission), and 500 when a check could not be made (fail
//! closed). Shared by the local, remote and snapshot author checks.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

use crate::access::{AccessError, Denial, Permission};
use crate::machine::FieldError;
use crate::machine::field_error::{ErrorType, join};

use super::review::{Request, Verdict};

/// 500 InternalError: the check could not be made, so the Machine is refused until it can.
pub fn unchecked(req: &Request, fields: &[&str], e: &AccessError) -> Verdict {
    tracing::warn!(uid = %req.uid, error = %e, "access check failed; denying");
    let mut fields = fields.to_vec();
    fields.dedup();
    Verdict::deny(Status {
        code: Some(500),
        reason: Some("InternalError".to_owned()),
        status: Some("Failure".to_owned()),
        message: Some(format!(
            "cannot check whether the author may use {} ({e}); \
             refused until the check can be made",
            fields.join(", ")
        )),
        ..Default::default()
    })
}

/// 403 Forbidden, one cause per refused permission, worded like the API server's field errors.
pub fn forbidden(kind: &str, name: &str, user: &str, denied: &[Permission]) -> Status {
    forbidden_on(kind, name, user, denied, None)
}

/// [`forbidden`], for a Machine on remote `cluster` when set.
pub fn forbidden_on(
    kind: &str,
    name: &str,
    user: &str,
    denied: &[Permission],
    cluster: Option<&str>,
) -> Status {
    let errors: Vec<FieldError> = denied
        .iter()
        .map(|p| FieldError {
            kind: ErrorType::Forbidden,
            field: p.field.clone(),
            value: serde_json::Value::Null,
            detail: Denial {
                user,
                permission: p,
                cluster,
            }
            .to_string(),
        })
        .collect();
    forbidden_status(kind, name, join(&errors), &errors)
}

/// 403 Forbidden for Machine `name`: the message joins `errors`, one cause each, worded like
/// the API server's field errors.
pub fn machine_forbidden(name: &str, errors: &[FieldError]) -> Status {
    forbidden_status("Machine", name, join(errors), errors)
}

/// 403 Forbidden for the `kind` (Machine, NetworkConfiguration) named `name`, saying `reason`,
/// with a cause per error.
pub fn forbidden_status(kind: &str, name: &str, reason: String, errors: &[FieldError]) -> Status {
    let causes: Vec<StatusCause> = errors
        .iter()
        .map(|e| StatusCause {
            field: Some(e.field.clone()),
            message: Some(e.body()),
            reason: Some(e.kind.cause_reason().to_owned()),
        })
        .collect();
    Status {
        code: Some(403),
        reason: Some("Forbidden".to_owned()),
        status: Some("Failure".to_owned()),
        message: Some(format!(
            "{kind}.vitistack.io {name:?} is forbidden: {reason}"
        )),
        details: Some(StatusDetails {
            name: (!name.is_empty()).then(|| name.to_owned()),
            group: Some("vitistack.io".to_owned()),
            kind: Some(kind.to_owned()),
            causes: (!causes.is_empty()).then_some(causes),
            ..Default::default()
        }),
        ..Default::default()
    }
}
