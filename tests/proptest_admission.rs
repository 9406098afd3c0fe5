//! Property tests of the admission decisions against SPEC.md:
//! - the decoder, mutate and validate never panic, whatever arrives;
//! - for valid Machines, mutation is idempotent and its output validates;
//! - the merge matches an independent model of the spec (template table, override field by
//!   field, disks by name, field defaults), also after a template change on UPDATE;
//! - an allowed update never removes or shrinks a stored disk.

use base64::Engine;
use kubevirt_operator::admission::Admission;
use kubevirt_operator::admission::review::{self, GroupVersionKind, Request, Verdict};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::machine::machine_types::MachineTypes;
use proptest::prelude::*;
use serde_json::{Value, json};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        // Failures are reported with their shrunk input; no regression files in the tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ------------------------------------------------------------------------------------------
// The spec's template table, written out here so that the model does not borrow from the code.

struct Template {
    cores: i64,
    memory: &'static str,
    root: &'static str,
}

fn template(name: &str) -> Template {
    match name {
        "small" => Template {
            cores: 1,
            memory: "2Gi",
            root: "20Gi",
        },
        "medium" => Template {
            cores: 2,
            memory: "4Gi",
            root: "40Gi",
        },
        "large" => Template {
            cores: 4,
            memory: "8Gi",
            root: "80Gi",
        },
        other => panic!("not a template: {other}"),
    }
}

const TEMPLATES: &[&str] = &["small", "medium", "large"];

// ------------------------------------------------------------------------------------------
// Requests and verdicts.

/// With i440fx allowed too (a KubeVirt whose emulatedMachines list it), so the generated
/// machine types all stay valid.
fn admission(default_template: &str) -> Admission {
    let types = MachineTypes::parse("q35*,pc-q35*,pc,pc-i440fx*").expect("patterns");
    let catalog = Catalog::with_default(default_template)
        .expect("built-in")
        .with_machine_types(types);
    Admission::new(catalog).expect("schema")
}

fn machine(spec: Value) -> Value {
    json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
           "metadata": {"name": "vm", "namespace": "default"}, "spec": spec})
}

fn request(operation: &str, object: Option<Value>, old: Option<Value>) -> Request {
    Request {
        uid: "prop".into(),
        kind: GroupVersionKind {
            group: "vitistack.io".into(),
            version: "v1alpha1".into(),
            kind: "Machine".into(),
        },
        name: "vm".into(),
        namespace: Some("default".into()),
        operation: operation.into(),
        object,
        old_object: old,
        ..Request::default()
    }
}

fn has_patch(v: &Verdict) -> bool {
    v.patch.as_ref().is_some_and(|p| !p.0.is_empty())
}

/// The object after the mutating webhook: its verdict must allow, and its patch apply.
fn mutated(a: &Admission, req: &Request) -> Result<Value, TestCaseError> {
    let verdict = a.mutate(req);
    prop_assert!(verdict.allowed, "mutate denied: {:?}", verdict.status);
    let mut object = req.object.clone().expect("object");
    if let Some(patch) = &verdict.patch {
        json_patch::patch(&mut object, patch)
            .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
    }
    Ok(object)
}

/// Whatever the verdict, it must be answerable on the wire: encodes, and a patch decodes back.
fn assert_encodable(verdict: &Verdict) -> Result<(), TestCaseError> {
    let bytes = review::encode(review::V1, "prop", verdict)
        .map_err(|e| TestCaseError::fail(format!("does not encode: {e}")))?;
    let answer: Value = serde_json::from_slice(&bytes).expect("encode writes JSON");
    prop_assert_eq!(&answer["response"]["allowed"], &json!(verdict.allowed));
    if !verdict.allowed {
        let message = answer["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default();
        prop_assert!(!message.is_empty(), "a denial must say why: {}", answer);
    }
    if let Some(patch) = answer["response"]["patch"].as_str() {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("base64");
        serde_json::from_slice::<json_patch::Patch>(&raw).expect("a JSON Patch");
        prop_assert_eq!(&answer["response"]["patchType"], "JSONPatch");
    }
    Ok(())
}

use proptest_admission::arbitrary::*;
use proptest_admission::model::*;
use proptest_admission::strategies::*;

/// The tests, by subject, in tests/proptest_admission/ (still one test binary).
mod proptest_admission {
    pub mod arbitrary;
    pub mod model;
    mod properties;
    pub mod strategies;
    mod updates;
}
