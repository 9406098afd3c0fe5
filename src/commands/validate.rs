//! `kubevirt-operator validate -f FILE`: the webhooks' own decisions, offline. Each Machine is
//! mutated (defaults, template merge) and then validated exactly as kube-apiserver would have the
//! webhooks do it on CREATE.

use std::io::Read;

use serde::Deserialize;
use serde_json::Value;

use crate::admission::Admission;
use crate::admission::review::{GroupVersionKind, Request, Verdict};

/// What became of one document.
#[derive(Debug, PartialEq)]
pub enum Checked {
    /// The defaulted Machine, and any warnings.
    Valid {
        machine: Value,
        warnings: Vec<String>,
    },
    /// Why it was denied, in the webhook's words.
    Invalid { name: String, message: String },
}

/// Reads `path` (`-` for standard input).
pub fn read_input(path: &std::path::Path) -> std::io::Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        Ok(s)
    } else {
        std::fs::read_to_string(path)
    }
}

/// Checks every document of a YAML stream (JSON is YAML too). Empty documents are skipped.
pub fn check_documents(input: &str, admission: &Admission) -> Result<Vec<Checked>, String> {
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(input).enumerate() {
        let value = Value::deserialize(doc)
            .map_err(|e| format!("document {}: not YAML or JSON: {e}", i + 1))?;
        if value.is_null() {
            continue;
        }
        out.push(check_one(value, i + 1, admission));
    }
    Ok(out)
}

fn check_one(object: Value, index: usize, admission: &Admission) -> Checked {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let (api_version, kind) = (
        object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    if api_version != "vitistack.io/v1alpha1" || kind != "Machine" {
        return Checked::Invalid {
            name,
            message: format!(
                "document {index}: {api_version}/{kind} is not a vitistack.io/v1alpha1 Machine"
            ),
        };
    }
    let mut request = Request {
        uid: format!("offline-{index}"),
        kind: GroupVersionKind {
            group: "vitistack.io".into(),
            version: "v1alpha1".into(),
            kind: "Machine".into(),
        },
        name: name.clone(),
        namespace: object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned),
        operation: "CREATE".into(),
        object: Some(object),
        ..Request::default()
    };
    let mutated = admission.mutate(&request);
    if !mutated.allowed {
        return denied(name, &mutated);
    }
    if let (Some(patch), Some(object)) = (&mutated.patch, request.object.as_mut())
        && let Err(e) = json_patch::patch(object, patch)
    {
        return Checked::Invalid {
            name,
            message: format!("internal error: the mutation does not apply: {e}"),
        };
    }
    let validated = admission.validate(&request);
    if !validated.allowed {
        return denied(name, &validated);
    }
    Checked::Valid {
        machine: request.object.unwrap_or_default(),
        warnings: validated.warnings,
    }
}

fn denied(name: String, verdict: &Verdict) -> Checked {
    let message = verdict
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_else(|| "denied".to_owned());
    Checked::Invalid { name, message }
}
