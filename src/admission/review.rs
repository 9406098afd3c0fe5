//! AdmissionReview on the wire, `admission.k8s.io/v1` and `v1beta1` (same shape).
//!
//! Our own small types rather than kube's: the object must stay raw JSON (it is checked against
//! the schema before it is typed), an unknown operation must still yield a uid to answer, and the
//! patch must be base64 as the admission API's `[]byte` requires.

use base64::Engine;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::{Exceeded, within_limits};

pub const V1: &str = "admission.k8s.io/v1";
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("request body is not a JSON AdmissionReview: {0}")]
    Json(String),
    #[error("kind must be \"AdmissionReview\", got {0:?}")]
    Kind(String),
    #[error("apiVersion must be {V1:?} or {V1BETA1:?}, got {0:?}")]
    ApiVersion(String),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("AdmissionReview request has no uid")]
    NoUid,
    #[error("{0}")]
    Exceeded(Exceeded),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<Request>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

/// The parts of an AdmissionRequest this webhook reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub old_object: Option<Value>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// The author, for checks made as them.
    #[serde(default)]
    pub user_info: crate::access::UserInfo,
}

/// A decoded review: the version to answer in and the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Review {
    pub api_version: String,
    pub request: Request,
}

/// Decodes a review. Errors that still carry a uid come back with it, so they can be denied
/// in an AdmissionReview rather than with a bare HTTP error.
pub fn decode(body: &[u8]) -> Result<Review, DecodeError> {
    within_limits(body).map_err(DecodeError::Exceeded)?;
    let wire: WireReview =
        serde_json::from_slice(body).map_err(|e| DecodeError::Json(e.to_string()))?;
    if wire.kind != "AdmissionReview" {
        return Err(DecodeError::Kind(wire.kind));
    }
    if wire.api_version != V1 && wire.api_version != V1BETA1 {
        return Err(DecodeError::ApiVersion(wire.api_version));
    }
    let request = wire.request.ok_or(DecodeError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(DecodeError::NoUid);
    }
    Ok(Review {
        api_version: wire.api_version,
        request,
    })
}

/// The version and uid of a review too large to decode, read without building its object, so
/// the refusal can be an AdmissionReview the user sees rather than a failed call.
pub fn identify(body: &[u8]) -> Option<(String, String)> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Skeleton {
        #[serde(default)]
        api_version: String,
        request: Option<Uid>,
    }
    #[derive(Deserialize)]
    struct Uid {
        #[serde(default)]
        uid: String,
    }
    let skeleton: Skeleton = serde_json::from_slice(body).ok()?;
    let uid = skeleton.request?.uid;
    let known = skeleton.api_version == V1 || skeleton.api_version == V1BETA1;
    (known && !uid.is_empty()).then_some((skeleton.api_version, uid))
}

/// What the webhook decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    pub allowed: bool,
    pub status: Option<Status>,
    /// JSON Patch operations (RFC 6902) for the object, when mutating.
    pub patch: Option<json_patch::Patch>,
    pub warnings: Vec<String>,
}

impl Verdict {
    pub fn allow() -> Self {
        Verdict {
            allowed: true,
            ..Default::default()
        }
    }

    pub fn deny(status: Status) -> Self {
        Verdict {
            allowed: false,
            status: Some(status),
            ..Default::default()
        }
    }

    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireResponseReview<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: WireResponse<'a>,
}

/// Encodes the answer in the request's own apiVersion, with its uid; an empty patch is omitted.
pub fn encode(
    api_version: &str,
    uid: &str,
    verdict: &Verdict,
) -> Result<Vec<u8>, serde_json::Error> {
    let patch = match &verdict.patch {
        Some(p) if !p.0.is_empty() => {
            Some(base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(p)?))
        }
        _ => None,
    };
    let review = WireResponseReview {
        api_version,
        kind: "AdmissionReview",
        response: WireResponse {
            uid,
            allowed: verdict.allowed,
            status: verdict.status.as_ref(),
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
            warnings: &verdict.warnings,
        },
    };
    serde_json::to_vec(&review)
}
