//! The mutating webhook's clone step (`spec.cloneFrom`), on CREATE: the author must be allowed
//! to `get` the source Machine (asked first, so nobody learns whether it exists without the
//! right); the source is read, the new Machine filled from it ([`clones::fill`], pure) and
//! decided again as if written that way, so MACs, addresses and the class are its own. The
//! validating webhook then asks the author CDI's clone right on each source claim (the filled
//! disks are `pvc` clones) and `get` on the source again. Any failure denies: a Machine that
//! says it is a clone is never stored as something else.

use json_patch::{AddOperation, Patch, PatchOperation, jsonptr::PointerBuf};
use serde_json::Value;

use crate::access::AccessReviewer;
use crate::access::needs::source_machine;
use crate::api::names::KUBEVIRT_CONFIG_ANNOTATION;
use crate::api::{Machine, MachineSpec};
use crate::machine::clones::{self, SourceMachine};
use crate::machine::placement;
use crate::machine::{FieldError, FieldPath};

use super::decide::{Admission, invalid};
use super::refusals::{forbidden, unchecked};
use super::review::{Request, Verdict};

const FIELD: &str = "spec.cloneFrom.machine";

/// The source a CREATE names in `spec.cloneFrom`, with the spec as written; `None` for
/// anything else (left to `verdict`).
fn requested(req: &Request) -> Option<(MachineSpec, String)> {
    let subresource = req.sub_resource.as_deref().is_some_and(|s| !s.is_empty());
    if req.operation != "CREATE" || subresource {
        return None;
    }
    let spec = req.object.as_ref()?.get("spec")?;
    spec.pointer("/cloneFrom/machine")?;
    let spec: MachineSpec = serde_json::from_value(spec.clone()).ok()?;
    let source = clones::source_of(&spec)?.to_owned();
    Some((spec, source))
}

/// `verdict` for a write that clones nothing; else the decision on the Machine filled from its
/// source, or why it cannot be.
pub async fn expand(
    admission: &Admission,
    reviewer: &AccessReviewer,
    req: &Request,
    verdict: Verdict,
    deadline: tokio::time::Instant,
) -> Verdict {
    let Some((spec, source)) = requested(req) else {
        return verdict;
    };
    // Rules on the field itself first (a malformed name is never looked up).
    if !clones::errors(&spec).is_empty() {
        return verdict;
    }
    let ns = req.namespace.as_deref().unwrap_or_default();
    let user = &req.user_info;
    match reviewer
        .denied(user, vec![source_machine(ns, &source)], deadline)
        .await
    {
        Ok(denied) if denied.is_empty() => {}
        Ok(denied) => {
            let status = forbidden("Machine", &req.name, &user.username, &denied);
            return Verdict::deny(status);
        }
        Err(e) => return unchecked(req, &[FIELD], &e),
    }
    let found = match reviewer.read::<Machine>(user, ns, &source, deadline).await {
        Ok(Some(m)) => m,
        Ok(None) => {
            let why = format!("Machine {source} not found in namespace {ns}");
            let error = FieldError::invalid(&FieldPath::new(FIELD), source.as_str(), why);
            return Verdict::deny(invalid(&req.name, &[error]));
        }
        Err(e) => return unchecked(req, &[FIELD], &e),
    };
    let raw = req.object.as_ref().unwrap_or(&Value::Null);
    // Where the source's claims are: its recorded cluster, else its annotation's.
    let placed = placement::of(&found, None);
    let cluster = (raw.pointer("/metadata/annotations"))
        .and_then(|a| a.get(KUBEVIRT_CONFIG_ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| admission.default_cluster().map(str::to_owned))
        .filter(|c| !c.is_empty());
    let from = SourceMachine {
        name: &source,
        spec: &found.spec,
        cluster: placed.remote(),
    };
    let filled = match clones::fill(&from, &spec, cluster.as_deref()) {
        Ok(filled) => filled,
        Err(errors) => return Verdict::deny(invalid(&req.name, &errors)),
    };
    let filled = match serde_json::to_value(&filled) {
        Ok(v) => v,
        Err(e) => return Verdict::deny(super::status::internal(&e.to_string())),
    };
    let mut written = req.clone();
    if let Some(object) = written.object.as_mut().and_then(Value::as_object_mut) {
        object.insert("spec".to_owned(), filled.clone());
    }
    let decided = admission.mutate(&written);
    with_spec(decided, filled)
}

/// A verdict on the filled object, as a patch of the object as written: the filled spec is
/// added whenever the decision left the spec alone (only the spec differs between the two).
fn with_spec(mut verdict: Verdict, filled: Value) -> Verdict {
    if !verdict.allowed {
        return verdict;
    }
    let spec = PointerBuf::from_tokens(["spec"]);
    let patch = verdict.patch.get_or_insert_with(|| Patch(Vec::new()));
    let replaces = patch
        .0
        .iter()
        .any(|op| matches!(op, PatchOperation::Add(a) if a.path == spec));
    if !replaces {
        patch.0.insert(
            0,
            PatchOperation::Add(AddOperation {
                path: spec,
                value: filled,
            }),
        );
    }
    verdict
}
