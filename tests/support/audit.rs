//! kube-apiserver's audit log: every request, at Metadata level, for tests that read who called
//! which verb on what.

use anyhow::{Context, Result};

use super::ControlPlane;

pub(super) const AUDIT_POLICY: &str = "audit-policy.yaml";
pub(super) const AUDIT_LOG: &str = "audit.log";
pub(super) const AUDIT_POLICY_YAML: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// One API request as the audit log recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AuditedRequest {
    pub user: String,
    pub verb: String,
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub code: i64,
    /// When the API server received it.
    pub received: Option<chrono::DateTime<chrono::Utc>>,
}

impl ControlPlane {
    /// Every request the API server has completed so far, in order.
    pub fn audited_requests(&self) -> Result<Vec<AuditedRequest>> {
        let text =
            std::fs::read_to_string(self.dir().join(AUDIT_LOG)).context("reading the audit log")?;
        let field = |v: &serde_json::Value, p: &str| {
            v.pointer(p)
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|e| {
                e["stage"] == "ResponseComplete" && e.pointer("/objectRef/resource").is_some()
            })
            .map(|e| AuditedRequest {
                user: field(&e, "/user/username"),
                verb: field(&e, "/verb"),
                api_group: field(&e, "/objectRef/apiGroup"),
                resource: field(&e, "/objectRef/resource"),
                subresource: field(&e, "/objectRef/subresource"),
                namespace: field(&e, "/objectRef/namespace"),
                name: field(&e, "/objectRef/name"),
                code: e
                    .pointer("/responseStatus/code")
                    .and_then(|c| c.as_i64())
                    .unwrap_or_default(),
                received: chrono::DateTime::parse_from_rfc3339(&field(
                    &e,
                    "/requestReceivedTimestamp",
                ))
                .ok()
                .map(|t| t.to_utc()),
            })
            .collect())
    }
}
