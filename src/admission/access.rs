//! The validating webhook's access check: after the rules admit a Machine, every permission
//! it needs from its author is asked of kube-apiserver as that author (see [`crate::access`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

use crate::access::data_sources::Ref;
use crate::access::needs::{claim_candidates, data_source_refs, unresolved_data_sources};
use crate::access::{
    AccessError, AccessReviewer, Change, Denial, MAX_ACCESS_CHECKS, Permission, machine_needs,
    over_limit,
};
use crate::machine::FieldError;
use crate::machine::field_error::{ErrorType, join};

use super::review::{Request, Verdict};

/// Multus' NetworkAttachmentDefinition, as RBAC names it.
pub const NAD_GROUP: &str = "k8s.cni.cncf.io";
pub const NAD_RESOURCE: &str = "network-attachment-definitions";

/// Turns an allowing verdict into a denial when the author lacks a permission the Machine needs,
/// or when the check cannot be made by `deadline` (fail closed). Denials and other operations
/// pass unchanged. First reads which claims the new disks would adopt, then asks.
pub async fn check(
    reviewer: &AccessReviewer,
    req: &Request,
    verdict: Verdict,
    deadline: tokio::time::Instant,
) -> Verdict {
    let writes = req.operation == "CREATE" || req.operation == "UPDATE";
    let subresource = req.sub_resource.as_deref().is_some_and(|s| !s.is_empty());
    let (true, true, false, Some(new)) = (verdict.allowed, writes, subresource, &req.object) else {
        return verdict;
    };
    let namespace = req.namespace.as_deref().unwrap_or_default();
    let none = BTreeSet::new();
    let unresolved = BTreeMap::new();
    let mut change = Change {
        namespace,
        old: (req.operation == "UPDATE")
            .then_some(req.old_object.as_ref())
            .flatten(),
        new,
        existing_claims: &none,
        data_sources: &unresolved,
    };
    // Where each DataSource points: the author is asked about what CDI would clone.
    let data_sources = match reviewer
        .data_sources(data_source_refs(&change), deadline)
        .await
    {
        Ok(found) => found,
        Err(e) => return unchecked(req, &["spec.disks[].source.dataSource"], &e),
    };
    change.data_sources = &data_sources;
    let nowhere = unresolved_data_sources(&change);
    if !nowhere.is_empty() {
        return Verdict::deny(points_nowhere(&req.name, &nowhere)).with_warnings(verdict.warnings);
    }
    let candidates = claim_candidates(&change);
    let claims = candidates.iter().map(|c| c.claim.clone()).collect();
    let existing = match reviewer.existing_claims(namespace, claims, deadline).await {
        Ok(existing) => existing,
        Err(e) => {
            let fields: Vec<&str> = candidates.iter().map(|c| c.field.as_str()).collect();
            return unchecked(req, &fields, &e);
        }
    };
    change.existing_claims = &existing;
    let needed = machine_needs(&change);
    if needed.is_empty() {
        return verdict;
    }
    if let Some(count) = over_limit(&needed) {
        tracing::info!(uid = %req.uid, count, "access checks over the limit; denying unasked");
        return Verdict::deny(too_many(&req.name, count)).with_warnings(verdict.warnings);
    }
    match reviewer
        .denied(&req.user_info, needed.clone(), deadline)
        .await
    {
        Ok(denied) if denied.is_empty() => verdict,
        Ok(denied) => Verdict::deny(forbidden(
            "Machine",
            &req.name,
            &req.user_info.username,
            &denied,
        ))
        .with_warnings(verdict.warnings),
        Err(e) => {
            let fields: Vec<&str> = needed.iter().map(|p| p.field.as_str()).collect();
            unchecked(req, &fields, &e)
        }
    }
}

/// 403 Forbidden before any SubjectAccessReview: the request needs more distinct access checks
/// of its author than one request may make.
fn too_many(name: &str, count: usize) -> Status {
    let reason = format!(
        "it needs {count} distinct access checks of its author (Secrets, clone sources, \
         credentials, adopted claims); at most {MAX_ACCESS_CHECKS} are made for one request: \
         make the change in smaller steps"
    );
    forbidden_status("Machine", name, reason, &[])
}

/// 403 Forbidden: a `dataSource` that names no DataSource, or one pointing at neither a PVC nor
/// a snapshot: what would be cloned is unknown, so the author's right to clone it cannot be asked.
fn points_nowhere(name: &str, nowhere: &[(String, Ref)]) -> Status {
    let errors: Vec<FieldError> = nowhere
        .iter()
        .map(|(field, (ns, ds))| FieldError {
            kind: ErrorType::Forbidden,
            field: field.clone(),
            value: serde_json::Value::Null,
            detail: format!(
                "DataSource {ds:?} in namespace {ns:?} does not exist or names no PVC or \
                 snapshot: what it clones must be known to ask the author's right to clone it"
            ),
        })
        .collect();
    machine_forbidden(name, &errors)
}

/// The native right for what a NetworkConfiguration makes: its author must be allowed to
/// `create` the NetworkAttachmentDefinition the operator writes for it, in its namespace, or
/// installing the operator would grant them one. Asked on CREATE and on spec changes.
pub fn network_needs(req: &Request) -> Vec<Permission> {
    let writes = req.operation == "CREATE" || req.operation == "UPDATE";
    let subresource = req.sub_resource.as_deref().is_some_and(|s| !s.is_empty());
    let spec = |o: &serde_json::Value| o.get("spec").cloned();
    let unchanged = req.operation == "UPDATE"
        && req.old_object.as_ref().map(spec) == req.object.as_ref().map(spec);
    if !writes || subresource || unchanged || req.object.is_none() {
        return Vec::new();
    }
    vec![Permission {
        field: "spec".to_owned(),
        verb: "create".to_owned(),
        group: NAD_GROUP.to_owned(),
        resource: NAD_RESOURCE.to_owned(),
        subresource: String::new(),
        namespace: req.namespace.clone().unwrap_or_default(),
        name: String::new(),
        adopted: false,
    }]
}

/// Like [`check`], for a NetworkConfiguration: asks [`network_needs`] of its author.
pub async fn check_network(
    reviewer: &AccessReviewer,
    req: &Request,
    verdict: Verdict,
    deadline: tokio::time::Instant,
) -> Verdict {
    let needed = network_needs(req);
    if !verdict.allowed || needed.is_empty() {
        return verdict;
    }
    match reviewer.denied(&req.user_info, needed, deadline).await {
        Ok(denied) if denied.is_empty() => verdict,
        Ok(denied) => Verdict::deny(forbidden(
            "NetworkConfiguration",
            &req.name,
            &req.user_info.username,
            &denied,
        )),
        Err(e) => unchecked(req, &["spec"], &e),
    }
}

/// 500 InternalError: the check could not be made, so the Machine is refused until it can.
fn unchecked(req: &Request, fields: &[&str], e: &AccessError) -> Verdict {
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
fn forbidden(kind: &str, name: &str, user: &str, denied: &[Permission]) -> Status {
    let errors: Vec<FieldError> = denied
        .iter()
        .map(|p| FieldError {
            kind: ErrorType::Forbidden,
            field: p.field.clone(),
            value: serde_json::Value::Null,
            detail: Denial {
                user,
                permission: p,
            }
            .to_string(),
        })
        .collect();
    forbidden_status(kind, name, join(&errors), &errors)
}

/// 403 Forbidden for Machine `name`: the message joins `errors`, one cause each, worded like
/// the API server's field errors.
fn machine_forbidden(name: &str, errors: &[FieldError]) -> Status {
    forbidden_status("Machine", name, join(errors), errors)
}

/// 403 Forbidden for the `kind` (Machine, NetworkConfiguration) named `name`, saying `reason`,
/// with a cause per error.
fn forbidden_status(kind: &str, name: &str, reason: String, errors: &[FieldError]) -> Status {
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(4)
    }

    fn secret_ref_request() -> Request {
        Request {
            uid: "u".into(),
            operation: "CREATE".into(),
            namespace: Some("team-a".into()),
            object: Some(json!({"spec": {"cloudInit": {"secretRef": {"name": "boot"}}}})),
            ..Default::default()
        }
    }

    /// An API server that takes the connection and never answers: the check ends at the
    /// admission's deadline, denying, instead of outliving the webhook's timeout.
    #[tokio::test]
    async fn a_silent_api_server_denies_at_the_deadline() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
        let port = silent.local_addr().expect("address").port();
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().expect("url"));
        let reviewer = AccessReviewer::new(kube::Client::try_from(config).expect("client"));
        let budget = std::time::Duration::from_millis(300);
        let started = tokio::time::Instant::now();
        let verdict = check(
            &reviewer,
            &secret_ref_request(),
            Verdict::allow(),
            started + budget,
        )
        .await;
        let took = started.elapsed();
        assert!(!verdict.allowed);
        assert!(took >= budget && took < budget * 5, "{took:?}");
        drop(silent);
    }

    /// An API server that refuses connections: the check cannot be made, so the Machine is
    /// refused with a message saying why (fail closed), not admitted.
    #[tokio::test]
    async fn an_unreachable_api_server_denies() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().expect("url"));
        let reviewer = AccessReviewer::new(kube::Client::try_from(config).expect("client"));
        let req = secret_ref_request();
        let verdict = check(&reviewer, &req, Verdict::allow(), soon()).await;
        assert!(!verdict.allowed);
        let message = verdict.status.and_then(|s| s.message).unwrap_or_default();
        assert!(
            message.starts_with(
                "cannot check whether the author may use spec.cloudInit.secretRef.name"
            ),
            "{message}"
        );
        // Nothing needed: no call, the verdict stands.
        let plain = Request {
            object: Some(json!({"spec": {}})),
            ..req.clone()
        };
        assert!(
            check(&reviewer, &plain, Verdict::allow(), soon())
                .await
                .allowed
        );
        // A denial stays a denial without asking.
        let denied = Verdict::deny(Status::default());
        assert_eq!(check(&reviewer, &req, denied.clone(), soon()).await, denied);
    }

    /// Whether a disk's claim exists is read before anything is asked: when it cannot be read,
    /// a Machine with disks is refused (fail closed), naming the disks and the claim.
    #[tokio::test]
    async fn an_unreadable_claim_denies_a_machine_with_disks() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().expect("url"));
        let reviewer = AccessReviewer::new(kube::Client::try_from(config).expect("client"));
        let req = Request {
            name: "db".into(),
            object: Some(json!({"metadata": {"name": "db"},
                "spec": {"disks": [{"name": "data", "size": "1Gi"}]}})),
            ..secret_ref_request()
        };
        let verdict = check(&reviewer, &req, Verdict::allow(), soon()).await;
        assert!(!verdict.allowed);
        let status = verdict.status.unwrap_or_default();
        assert_eq!(status.code, Some(500));
        let message = status.message.unwrap_or_default();
        assert!(
            message.starts_with(
                r#"cannot check whether the author may use spec.disks[0] (cannot read persistentvolumeclaims "db-data" in namespace "team-a": "#
            ),
            "{message}"
        );
        assert!(
            message.ends_with("refused until the check can be made"),
            "{message}"
        );
    }

    /// 17 distinct checks (17 CD-ROMs with credentials): refused at once, naming the limit,
    /// without a single call (the API server here refuses connections, which would be a 500).
    #[tokio::test]
    async fn more_access_checks_than_the_limit_are_refused_unasked() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().expect("url"));
        let reviewer = AccessReviewer::new(kube::Client::try_from(config).expect("client"));
        let cdroms = |n: usize| -> Vec<serde_json::Value> {
            (0..n)
                .map(|i| {
                    json!({"name": format!("c{i}"), "source": {"http": {
                    "url": "https://a/b.iso", "secretRef": {"name": format!("creds-{i}")}}}})
                })
                .collect()
        };
        let req = |n: usize| Request {
            name: "many".into(),
            object: Some(json!({"metadata": {"name": "many"}, "spec": {"cdroms": cdroms(n)}})),
            ..secret_ref_request()
        };
        let verdict = check(
            &reviewer,
            &req(MAX_ACCESS_CHECKS + 1),
            Verdict::allow(),
            soon(),
        )
        .await;
        let status = verdict.status.unwrap_or_default();
        assert_eq!(status.code, Some(403), "{status:?}");
        let message = status.message.unwrap_or_default();
        assert!(
            message.contains("it needs 17 distinct access checks")
                && message.contains("at most 16 are made for one request"),
            "{message}"
        );
        // At the limit, the checks are asked (and fail closed here: no API server).
        let at = check(&reviewer, &req(MAX_ACCESS_CHECKS), Verdict::allow(), soon()).await;
        assert_eq!(at.status.and_then(|s| s.code), Some(500));
    }

    /// Issue 25: any NetworkConfiguration author got an attachment, a right RBAC gives apart.
    #[test]
    fn a_network_configuration_needs_create_on_attachments_when_its_spec_changes() {
        let nc = |bridge: &str| json!({"metadata": {"name": "lan"}, "spec": {"bridge": bridge}});
        let req = |op: &str, old: Option<Value>| Request {
            uid: "u".into(),
            name: "lan".into(),
            operation: op.into(),
            namespace: Some("team-a".into()),
            object: Some(nc("br0")),
            old_object: old,
            ..Default::default()
        };
        let needed = network_needs(&req("CREATE", None));
        assert_eq!(
            needed
                .iter()
                .map(|p| (
                    p.field.as_str(),
                    p.verb.as_str(),
                    p.resource.as_str(),
                    p.namespace.as_str()
                ))
                .collect::<Vec<_>>(),
            [("spec", "create", "network-attachment-definitions", "team-a")]
        );
        assert_eq!(network_needs(&req("UPDATE", Some(nc("br1")))).len(), 1);
        assert!(network_needs(&req("UPDATE", Some(nc("br0")))).is_empty());
        assert!(network_needs(&req("DELETE", None)).is_empty());
        let s = forbidden("NetworkConfiguration", "lan", "bob", &needed);
        assert_eq!(
            s.message.as_deref(),
            Some(
                r#"NetworkConfiguration.vitistack.io "lan" is forbidden: spec: Forbidden: user "bob" cannot create network-attachment-definitions.k8s.cni.cncf.io in namespace "team-a""#
            )
        );
    }

    #[test]
    fn forbidden_message_names_field_verb_resource_and_namespace() {
        let p = Permission {
            field: "spec.cloudInit.secretRef.name".into(),
            verb: "get".into(),
            group: String::new(),
            resource: "secrets".into(),
            subresource: String::new(),
            namespace: "team-a".into(),
            name: "db".into(),
            adopted: false,
        };
        let s = forbidden("Machine", "vm", "bob", &[p]);
        assert_eq!(s.code, Some(403));
        assert_eq!(
            s.message.as_deref(),
            Some(
                r#"Machine.vitistack.io "vm" is forbidden: spec.cloudInit.secretRef.name: Forbidden: user "bob" cannot get secrets in namespace "team-a""#
            )
        );
    }
}
