//! The mutating webhook's half of pinning clone sources: on a write that changes what the guest
//! boots or sees (or that finds a `dataSource` volume unpinned), each DataSource the Machine
//! names is resolved and what it points to is recorded in
//! [`CLONE_SOURCES_ANNOTATION`]; the validating webhook then asks the author about exactly those
//! targets and refuses any other value (`super::access`), and the reconciler clones exactly
//! them. Otherwise the annotation is left as stored, and the validating webhook's guest-field
//! comparison refuses any change to it. A remote Machine gets no pins (its DataSources are
//! resolved on its own cluster, by the reconciler): any are removed.

use serde_json::Value;

use crate::access::data_sources::{self, pins};
use crate::access::{AccessReviewer, Change, MAX_ACCESS_CHECKS};
use crate::api::MachineSpec;
use crate::api::clone_sources::{self, CloneSources};
use crate::api::names::CLONE_SOURCES_ANNOTATION;

use super::decide::annotation_op;
use super::review::{Request, Verdict};

/// Adds the pins to an allowing mutate verdict. A look-up that fails or is late leaves them
/// out: the validating webhook then refuses the write, naming why.
pub async fn pin(
    reviewer: &AccessReviewer,
    req: &Request,
    mut verdict: Verdict,
    deadline: tokio::time::Instant,
) -> Verdict {
    let writes = req.operation == "CREATE" || req.operation == "UPDATE";
    let subresource = req.sub_resource.as_deref().is_some_and(|s| !s.is_empty());
    let (true, true, false, Some(raw)) = (verdict.allowed, writes, subresource, &req.object) else {
        return verdict;
    };
    let old = (req.operation == "UPDATE")
        .then_some(req.old_object.as_ref())
        .flatten();
    if !concerned(raw) && !old.is_some_and(concerned) {
        return verdict;
    }
    // The object as the validating webhook will see it.
    let mut new = raw.clone();
    if let Some(patch) = &verdict.patch
        && json_patch::patch(&mut new, patch).is_err()
    {
        return verdict;
    }
    let Some(spec) = new
        .get("spec")
        .and_then(|s| serde_json::from_value::<MachineSpec>(s.clone()).ok())
    else {
        return verdict;
    };
    let namespace = req.namespace.as_deref().unwrap_or_default();
    let (none, unresolved) = (Default::default(), Default::default());
    let change = Change {
        namespace,
        old,
        new: &new,
        existing_claims: &none,
        data_sources: &unresolved,
    };
    // A remote Machine's DataSources are resolved on its cluster, by the reconciler: nothing is
    // pinned from this one, and a pin is removed on a write that re-checks the author anyway
    // (one written by hand is such a write); other writes leave a stored one, which the
    // reconciler ignores for a remote Machine.
    if super::access::remote_cluster(&new).is_some() {
        let op = change
            .guest_affected()
            .then(|| set_or_remove(&new, &CloneSources::new()));
        if let Some(op) = op.flatten() {
            verdict.patch.get_or_insert_default().0.push(op);
        }
        return verdict;
    }
    let refs = data_sources::references(namespace, &spec);
    let stored = old.map(pinned).unwrap_or_default();
    let unpinned = data_sources::volumes(&spec).any(|(volume, _)| !stored.contains_key(volume));
    if !change.guest_affected() && !unpinned {
        return verdict;
    }
    // Over the limit: the validating webhook refuses it, unasked.
    let resolved = match refs.len() {
        0 => Default::default(),
        n if n > MAX_ACCESS_CHECKS => return verdict,
        _ => match reviewer.data_sources(&req.user_info, refs, deadline).await {
            Ok(resolved) => resolved,
            Err(e) => {
                tracing::info!(uid = %req.uid, error = %e, "clone sources not pinned");
                return verdict;
            }
        },
    };
    let op = set_or_remove(&new, &pins(namespace, &spec, &resolved));
    if let Some(op) = op {
        verdict.patch.get_or_insert_default().0.push(op);
    }
    verdict
}

/// Whether `object` names a DataSource or carries pins: anything else is left alone unparsed.
fn concerned(object: &Value) -> bool {
    let annotated = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CLONE_SOURCES_ANNOTATION))
        .is_some();
    let named = |list: &str| {
        (object.pointer(list).and_then(Value::as_array)).is_some_and(|items| {
            items.iter().any(|i| {
                i.pointer("/source/dataSource")
                    .is_some_and(|d| !d.is_null())
            })
        })
    };
    annotated || named("/spec/disks") || named("/spec/cdroms")
}

/// The pins `object` carries (none when absent or unreadable).
pub fn pinned(object: &Value) -> CloneSources {
    let annotations = object
        .pointer("/metadata/annotations")
        .and_then(|a| serde_json::from_value(a.clone()).ok());
    clone_sources::read(annotations.as_ref()).unwrap_or_default()
}

/// The operation that makes the annotation say `pins`: set, or removed when there are none.
fn set_or_remove(object: &Value, pins: &CloneSources) -> Option<json_patch::PatchOperation> {
    use json_patch::{PatchOperation, RemoveOperation, jsonptr::PointerBuf};
    if !pins.is_empty() {
        return annotation_op(
            object,
            CLONE_SOURCES_ANNOTATION,
            clone_sources::encode(pins),
        );
    }
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CLONE_SOURCES_ANNOTATION))?;
    Some(PatchOperation::Remove(RemoveOperation {
        path: PointerBuf::from_tokens(["metadata", "annotations", CLONE_SOURCES_ANNOTATION]),
    }))
}

#[cfg(test)]
mod tests;
