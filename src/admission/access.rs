//! The validating webhook's access check: after the rules admit a Machine, every permission
//! it needs from its author is asked of kube-apiserver as that author (see [`crate::access`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use crate::access::data_sources::Ref;
use crate::access::data_sources::pins;
use crate::access::needs::{claim_candidates, data_source_refs, unresolved_data_sources};
use crate::access::placement::{placement_need, remote_needs};
use crate::access::{
    AccessReviewer, Change, MAX_ACCESS_CHECKS, Permission, machine_needs, over_limit,
};
use crate::api::MachineSpec;
use crate::api::clone_sources::{self, CloneSources};
use crate::api::names::{CLONE_SOURCES_ANNOTATION, KUBEVIRT_CONFIG_ANNOTATION};
use crate::machine::FieldError;
use crate::machine::field_error::ErrorType;

use super::refusals::{forbidden, forbidden_on, forbidden_status, machine_forbidden, unchecked};
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
    let cluster = remote_cluster(new);
    if let Some(cluster) = &cluster
        && let Some(refused) =
            super::remote::refused(reviewer, req, &change, cluster, deadline).await
    {
        return refused.with_warnings(verdict.warnings);
    }
    // The needs known before any look-up are a lower bound, and each DataSource is a look-up
    // made for the author: over the limit, refused before a single call.
    let refs = data_source_refs(&change);
    let known = machine_needs(&change);
    if let Some(count) =
        over_limit(&known).or((refs.len() > MAX_ACCESS_CHECKS).then_some(refs.len()))
    {
        tracing::info!(uid = %req.uid, count, "access checks over the limit; denying unasked");
        return Verdict::deny(too_many(&req.name, count)).with_warnings(verdict.warnings);
    }
    if let Some(cluster) = &cluster {
        return check_remote(reviewer, req, verdict, &change, cluster, deadline).await;
    }
    // Where each DataSource points: the author is asked about what CDI would clone.
    let data_sources = match reviewer.data_sources(&req.user_info, refs, deadline).await {
        Ok(found) => found,
        Err(e) => return unchecked(req, &["spec.disks[].source.dataSource"], &e),
    };
    change.data_sources = &data_sources;
    let nowhere = unresolved_data_sources(&change);
    if !nowhere.is_empty() {
        return Verdict::deny(points_nowhere(&req.name, &nowhere)).with_warnings(verdict.warnings);
    }
    if let Some(status) = mispinned(&req.name, &change) {
        return Verdict::deny(status).with_warnings(verdict.warnings);
    }
    let candidates = claim_candidates(&change);
    let claims = candidates.iter().map(|c| c.claim.clone()).collect();
    let existing = match reviewer
        .existing_claims(&req.user_info, namespace, claims, deadline)
        .await
    {
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
    ask(reviewer, req, verdict, needed, None, deadline).await
}

/// [`check`]'s end for a Machine on remote `cluster`: nothing is looked up on this cluster (its
/// claims and DataSources that count are on the remote one; the reconciler resolves the
/// DataSources there), and the author is asked [`remote_needs`] and, on CREATE, `use`.
async fn check_remote(
    reviewer: &AccessReviewer,
    req: &Request,
    verdict: Verdict,
    change: &Change<'_>,
    cluster: &str,
    deadline: tokio::time::Instant,
) -> Verdict {
    // Nothing resolved here, so nothing may be pinned: a hand-written pin is refused (the
    // mutating webhook removes one).
    if let Some(status) = mispinned(&req.name, change) {
        return Verdict::deny(status).with_warnings(verdict.warnings);
    }
    let mut needed = remote_needs(change);
    if req.operation == "CREATE" {
        needed.push(placement_need(cluster));
    }
    if let Some(count) = over_limit(&needed) {
        return Verdict::deny(too_many(&req.name, count)).with_warnings(verdict.warnings);
    }
    ask(reviewer, req, verdict, needed, Some(cluster), deadline).await
}

/// The KubevirtConfig a Machine's annotation places it on (the mutating webhook has written the
/// default by now).
pub(super) fn remote_cluster(object: &serde_json::Value) -> Option<String> {
    let annotations = object.pointer("/metadata/annotations")?;
    let name = annotations.get(KUBEVIRT_CONFIG_ANNOTATION)?.as_str()?;
    (!name.is_empty()).then(|| name.to_owned())
}

/// `verdict`, unless the author lacks one of `needed` (403) or cannot be asked (500).
async fn ask(
    reviewer: &AccessReviewer,
    req: &Request,
    verdict: Verdict,
    needed: Vec<Permission>,
    cluster: Option<&str>,
    deadline: tokio::time::Instant,
) -> Verdict {
    match reviewer
        .denied(&req.user_info, needed.clone(), deadline)
        .await
    {
        Ok(denied) if denied.is_empty() => verdict,
        Ok(denied) => Verdict::deny(forbidden_on(
            "Machine",
            &req.name,
            &req.user_info.username,
            &denied,
            cluster,
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

/// 403 Forbidden: on a write that changes what the guest sees, the clone sources recorded must be
/// what each DataSource points to now, as the mutating webhook pinned them (`super::pins`): the
/// author is asked about exactly what the reconciler will clone.
fn mispinned(name: &str, change: &Change) -> Option<Status> {
    if !change.guest_affected() {
        return None;
    }
    let spec: MachineSpec = serde_json::from_value(change.new.get("spec")?.clone()).ok()?;
    let want = pins(change.namespace, &spec, change.data_sources);
    let have = (change.new.pointer("/metadata/annotations"))
        .and_then(|a| a.get(CLONE_SOURCES_ANNOTATION))
        .and_then(serde_json::Value::as_str);
    let pinned = match have {
        None => want.is_empty(),
        Some(raw) => serde_json::from_str::<CloneSources>(raw).ok().as_ref() == Some(&want),
    };
    if pinned {
        return None;
    }
    let error = FieldError {
        kind: ErrorType::Forbidden,
        field: format!("metadata.annotations[{CLONE_SOURCES_ANNOTATION}]"),
        value: have.map_or(serde_json::Value::Null, Into::into),
        detail: format!(
            "must record what each DataSource points to now ({}); only the operator's mutating \
             webhook sets it: a DataSource changed during this request, or the value was \
             written by hand; retry the write",
            clone_sources::encode(&want)
        ),
    };
    Some(machine_forbidden(name, &[error]))
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

#[cfg(test)]
mod tests;
