//! Whether and what to write of a computed status (pure; table tests in `status_write/tests.rs`):
//!
//! - **Pruned fields.** A Machine CRD older than the operator (Helm never upgrades CRDs) prunes
//!   status fields it does not know. [`pruned`] finds them by comparing what was sent with what
//!   the server stored; [`without`] leaves them out of every later comparison and write, so a
//!   pruned field never makes the status differ forever. [`missing_in_schema`] tells the same
//!   from the served CRD's schema, at leader start.
//! - **Import progress.** CDI moves `status.disks[].progress` every couple of seconds per import;
//!   a change that is only that ([`progress_only`]) is written at most every
//!   [`PROGRESS_EVERY`] per Machine, any other change at once ([`pace`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::Value;

use crate::api::MachineStatus;

/// Progress-only status changes are written at most this often per Machine.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Whether `new` must be written over `old` (never for `lastUpdated` alone).
pub fn differs(old: Option<&MachineStatus>, new: &MachineStatus) -> bool {
    let strip = |s: &MachineStatus| MachineStatus {
        last_updated: None,
        ..s.clone()
    };
    old.map(strip) != Some(strip(new))
}

/// What to do with a computed status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusWrite {
    /// Nothing but `lastUpdated` would change.
    Unchanged,
    Now,
    /// Only progress changed, and the last write was recent: write at this instant (the shell
    /// requeues the Machine then, so the last progress is not lost).
    Later(Instant),
}

/// When to write `new` over `old`, given this process's last status write of the Machine.
pub fn pace(
    old: Option<&MachineStatus>,
    new: &MachineStatus,
    last_write: Option<Instant>,
    now: Instant,
) -> StatusWrite {
    if !differs(old, new) {
        return StatusWrite::Unchanged;
    }
    let due = last_write.map(|t| t + PROGRESS_EVERY);
    match (old, due) {
        (Some(old), Some(due)) if due > now && progress_only(old, new) => StatusWrite::Later(due),
        _ => StatusWrite::Now,
    }
}

/// Whether `old` and `new` differ only in `disks[].progress` (both known: a progress that
/// appears or goes is written at once) and in the condition messages quoting it.
pub fn progress_only(old: &MachineStatus, new: &MachineStatus) -> bool {
    let both_known = old.disks.len() == new.disks.len()
        && old
            .disks
            .iter()
            .zip(&new.disks)
            .all(|(o, n)| o.progress.is_some() == n.progress.is_some());
    both_known && masked(old) == masked(new)
}

/// `s` with every progress left out, from the disks and from the messages that quote it.
fn masked(s: &MachineStatus) -> MachineStatus {
    let progress: Vec<&str> = (s.disks.iter())
        .filter_map(|d| d.progress.as_deref())
        .filter(|p| !p.is_empty())
        .collect();
    let mut out = MachineStatus {
        last_updated: None,
        ..s.clone()
    };
    for d in &mut out.disks {
        d.progress = None;
    }
    for c in &mut out.conditions {
        for p in &progress {
            c.message = c.message.replace(p, "<progress>");
        }
    }
    out
}

/// The paths below `status` (`disks`, `disks[].progress`) that `sent` sets and `stored` lacks.
/// Lists are compared entry by entry (the server keeps their order).
pub fn pruned(sent: &Value, stored: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk(sent, stored, "", &mut out);
    out
}

fn walk(sent: &Value, stored: &Value, at: &str, out: &mut BTreeSet<String>) {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_owned()
        } else {
            format!("{at}.{k}")
        }
    };
    match (sent, stored) {
        (Value::Object(s), Value::Object(t)) => {
            for (k, v) in s.iter().filter(|(_, v)| !v.is_null()) {
                match t.get(k) {
                    None => {
                        out.insert(join(k));
                    }
                    Some(w) => walk(v, w, &join(k), out),
                }
            }
        }
        (Value::Array(s), Value::Array(t)) => {
            for (v, w) in s.iter().zip(t) {
                walk(v, w, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

/// `status` without the fields at `paths` (as [`pruned`] names them). Unchanged if that would
/// not be a status any more (a required field of a condition, say).
pub fn without(status: &MachineStatus, paths: &BTreeSet<String>) -> MachineStatus {
    if paths.is_empty() {
        return status.clone();
    }
    let Ok(mut value) = serde_json::to_value(status) else {
        return status.clone();
    };
    for p in paths {
        let segments: Vec<&str> = p.split('.').collect();
        remove(&mut value, &segments);
    }
    serde_json::from_value(value).unwrap_or_else(|_| status.clone())
}

fn remove(value: &mut Value, path: &[&str]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let (key, each) = match first.strip_suffix("[]") {
        Some(k) => (k, true),
        None => (*first, false),
    };
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    match (rest.is_empty(), each) {
        (true, false) => {
            obj.remove(key);
        }
        (_, true) => {
            if let Some(Value::Array(items)) = obj.get_mut(key) {
                for item in items {
                    remove(item, rest);
                }
            }
        }
        (false, false) => {
            if let Some(v) = obj.get_mut(key) {
                remove(v, rest);
            }
        }
    }
}

/// The top-level status fields among `written` that the served schema of `status` lacks (none
/// when it keeps unknown fields, or has no properties at all to compare with).
pub fn missing_in_schema(status: Option<&JSONSchemaProps>, written: &[&str]) -> Vec<String> {
    let Some(status) = status else {
        return written.iter().map(|f| (*f).to_owned()).collect();
    };
    if status.x_kubernetes_preserve_unknown_fields == Some(true) {
        return Vec::new();
    }
    let Some(props) = status.properties.as_ref() else {
        return written.iter().map(|f| (*f).to_owned()).collect();
    };
    (written.iter())
        .filter(|f| !props.contains_key(**f))
        .map(|f| (*f).to_owned())
        .collect()
}

/// The warning for pruned or missing `fields`, as operators read it.
pub fn upgrade_warning(fields: &[String]) -> String {
    let named: Vec<String> = fields.iter().map(|f| format!("status.{f}")).collect();
    format!(
        "the served Machine CRD lacks {}: upgrade the CRD (kubectl apply -f manifests/crds.yaml; \
         Helm never upgrades CRDs), then restart the operator",
        named.join(", ")
    )
}

#[cfg(test)]
mod tests;
