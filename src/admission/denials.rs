//! Denials by reason, for `kubevirt_operator_admission_denials_total{webhook, reason}`: the
//! denied verdict's Status reason (Kubernetes' own vocabulary: Invalid, Forbidden, ...) travels
//! with the encoded response as an extension, so the route that records the metrics reads it
//! without a second result type threaded through every path. The label is bounded: reasons
//! outside Kubernetes' list count as `Other`.

use axum::response::Response;

use super::review::Verdict;

/// Kubernetes' StatusReasons an admission denial may carry (metav1.StatusReason).
const KNOWN: &[&str] = &[
    "Invalid",
    "Forbidden",
    "RequestEntityTooLarge",
    "BadRequest",
    "TooManyRequests",
    "ServiceUnavailable",
    "Timeout",
    "Conflict",
    "NotFound",
    "AlreadyExists",
    "InternalError",
    "Unauthorized",
    "MethodNotAllowed",
];

/// The reason a denial is counted under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denial(pub &'static str);

/// The label of a denied verdict's reason: its Status reason when Kubernetes knows it, `Other`
/// when it names another, `Unspecified` when it has none.
pub fn reason_of(verdict: &Verdict) -> &'static str {
    match verdict.status.as_ref().and_then(|s| s.reason.as_deref()) {
        None | Some("") => "Unspecified",
        Some(r) => KNOWN.iter().find(|k| **k == r).copied().unwrap_or("Other"),
    }
}

/// Marks `response` as the answer to a denied `verdict`; allowed ones stay unmarked.
pub fn mark(mut response: Response, verdict: &Verdict) -> Response {
    if !verdict.allowed {
        response.extensions_mut().insert(Denial(reason_of(verdict)));
    }
    response
}

/// The denial `response` answers, if any.
pub fn of(response: &Response) -> Option<Denial> {
    response.extensions().get::<Denial>().copied()
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

    fn denied(reason: Option<&str>) -> Verdict {
        Verdict::deny(Status {
            reason: reason.map(str::to_owned),
            ..Status::default()
        })
    }

    #[test]
    fn reasons_are_bounded_and_only_denials_are_marked() {
        assert_eq!(reason_of(&denied(Some("Invalid"))), "Invalid");
        assert_eq!(reason_of(&denied(Some("Forbidden"))), "Forbidden");
        assert_eq!(reason_of(&denied(Some("whatever a user wrote"))), "Other");
        assert_eq!(reason_of(&denied(None)), "Unspecified");
        let marked = mark("x".into_response(), &denied(Some("Invalid")));
        assert_eq!(of(&marked), Some(Denial("Invalid")));
        assert_eq!(of(&mark("x".into_response(), &Verdict::allow())), None);
    }
}
