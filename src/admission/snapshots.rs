//! MachineSnapshot and MachineRestore admission, the rules that need no look-up: the names they
//! hold are set and well formed, and never change (a snapshot of one Machine cannot become
//! another's). Whether the Machine and snapshot exist, whether they belong together, and the
//! author's rights on the Machine are checked next ([`super::snapshot_access`]).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::names::GROUP;
use crate::api::snapshots::{MachineRestoreSpec, MachineSnapshotSpec};
use crate::machine::names::dns1123_subdomain;
use crate::machine::{FieldError, FieldPath};

use super::Admission;
use super::review::{Request, Verdict};
use super::status::{bad_request, invalid_kind};

pub const SNAPSHOT_KIND: &str = "MachineSnapshot";
pub const RESTORE_KIND: &str = "MachineRestore";

impl Admission {
    pub fn validate_snapshot(&self, req: &Request) -> Verdict {
        admit::<MachineSnapshotSpec>(req, SNAPSHOT_KIND, |spec| {
            vec![("machineName", spec.machine_name.as_str())]
        })
    }

    pub fn validate_restore(&self, req: &Request) -> Verdict {
        admit::<MachineRestoreSpec>(req, RESTORE_KIND, |spec| {
            vec![
                ("machineName", spec.machine_name.as_str()),
                ("snapshotName", spec.snapshot_name.as_str()),
            ]
        })
    }
}

/// The rules of both kinds: `names` lists the spec's name fields, each required and a DNS-1123
/// subdomain; the spec is immutable.
fn admit<S: DeserializeOwned>(
    req: &Request,
    kind: &str,
    names: impl Fn(&S) -> Vec<(&'static str, &str)>,
) -> Verdict {
    if req.operation != "CREATE" && req.operation != "UPDATE" {
        return Verdict::deny(bad_request(&format!(
            "operation {:?} is not handled: this webhook admits {kind} CREATE and UPDATE only",
            req.operation
        )));
    }
    if req.kind.group != GROUP || req.kind.kind != kind {
        return Verdict::deny(bad_request(&format!(
            "Kind={} is not handled: this webhook admits {GROUP}/v1alpha1, Kind={kind} only",
            req.kind.kind
        )));
    }
    if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
        return Verdict::allow();
    }
    let Some(raw) = &req.object else {
        return Verdict::deny(bad_request("AdmissionReview request has no object"));
    };
    let name = raw
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&req.name);
    let errors = errors::<S>(req, raw, names);
    if errors.is_empty() {
        Verdict::allow()
    } else {
        Verdict::deny(invalid_kind(kind, name, &errors))
    }
}

fn errors<S: DeserializeOwned>(
    req: &Request,
    raw: &Value,
    names: impl Fn(&S) -> Vec<(&'static str, &str)>,
) -> Vec<FieldError> {
    let spec_of = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
    let new = spec_of(raw);
    if req.operation == "UPDATE" {
        let old = req.old_object.as_ref().map(spec_of);
        if old.is_some_and(|old| old != new) {
            return vec![FieldError::forbidden(
                &FieldPath::new("spec"),
                "is immutable: make a new object instead",
            )];
        }
        // Unchanged: admitted as it was (metadata edits, labels).
        return vec![];
    }
    let spec = match serde_path_to_error::deserialize::<_, Option<S>>(new) {
        Ok(Some(spec)) => spec,
        Ok(None) => return vec![FieldError::required(&FieldPath::new("spec"), "")],
        Err(e) => {
            let path = format!("spec.{}", e.path()).replace(".[", "[");
            return vec![FieldError::type_invalid(
                &FieldPath::new(&path),
                Value::Null,
                e.inner().to_string(),
            )];
        }
    };
    let mut out = Vec::new();
    let spec_path = FieldPath::new("spec");
    for (field, value) in names(&spec) {
        let path = spec_path.child(field);
        if value.is_empty() {
            out.push(FieldError::required(&path, ""));
        } else if let Some(why) = dns1123_subdomain(value).into_iter().next() {
            out.push(FieldError::invalid(&path, value, why));
        }
    }
    out
}

#[cfg(test)]
mod tests;
