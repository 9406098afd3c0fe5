//! The admission decisions, as plain functions of the request: the HTTP layer only decodes,
//! calls [`Admission::mutate`] or [`Admission::validate`], and encodes.

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};
use serde_json::Value;

use crate::access::AccessReviewer;
use crate::api::MachineSpec;
use crate::machine::annotations::annotation_errors;
use crate::machine::update_rules::validate_update;
use crate::machine::validation::{validate, validate_name};
use crate::machine::{Catalog, DEFAULTS_ANNOTATION, FINALIZER, FieldError, FieldPath, resolve};

use super::limits::{
    Exceeded, MAX_CAUSE_BYTES, MAX_CAUSES, MAX_MESSAGE_BYTES, shape_errors, truncate,
};
use super::review::{Request, Verdict};
use super::schema::{SchemaCheck, SchemaError, prune_nulls};

const GROUP: &str = "vitistack.io";
const KIND: &str = "Machine";

/// Everything the decisions need: the templates in force, the compiled CRD schema and, when
/// there is a cluster to ask, the access check made as the requesting user.
pub struct Admission {
    catalog: Catalog,
    schema: SchemaCheck,
    access: Option<AccessReviewer>,
}

struct Admitted {
    parsed: Parsed,
    /// The schema's and the rules' findings on the object, all of them.
    errors: Vec<FieldError>,
    warnings: Vec<String>,
    unchanged: bool,
}

/// A request's object, checked and typed.
struct Parsed {
    name: String,
    spec: MachineSpec,
    recorded: Option<MachineSpec>,
}

impl Admission {
    pub fn new(catalog: Catalog) -> Result<Self, SchemaError> {
        Ok(Admission {
            catalog,
            schema: SchemaCheck::machine()?,
            access: None,
        })
    }

    /// Validation also asks kube-apiserver whether the author may read what the Machine refers to.
    pub fn with_access(mut self, reviewer: AccessReviewer) -> Self {
        self.access = Some(reviewer);
        self
    }

    pub fn access(&self) -> Option<&AccessReviewer> {
        self.access.as_ref()
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Defaults and merges the template into the object, as a JSON Patch.
    pub fn mutate(&self, req: &Request) -> Verdict {
        let Admitted {
            parsed,
            errors,
            unchanged,
            ..
        } = match self.admit(req) {
            Ok(a) => a,
            Err(verdict) => return *verdict,
        };
        if !errors.is_empty() {
            // An unchanged spec that no longer validates (stored before a rule existed) must not
            // block metadata updates such as finalizer removal: leave it alone.
            return if unchanged {
                Verdict::allow()
            } else {
                Verdict::deny(invalid(&parsed.name, &errors))
            };
        }
        let resolved = resolve(
            &parsed.spec,
            record_for(&parsed, req).as_ref(),
            &self.catalog,
        );
        let (spec, record) = match (
            serde_json::to_value(&resolved.spec),
            serde_json::to_string(&resolved.from_template),
        ) {
            (Ok(spec), Ok(record)) => (spec, record),
            (Err(e), _) | (_, Err(e)) => {
                return Verdict::deny(internal(&format!(
                    "cannot encode the resolved Machine: {e}"
                )));
            }
        };
        // Only spec, the record and (on CREATE) the finalizer change. The spec is replaced
        // whole when it differs: the API server applies the patch to the object it sent, so
        // this is exact, and comparing is far cheaper than computing a minimal diff.
        let raw = req.object.as_ref().unwrap_or(&Value::Null);
        let mut patch = json_patch::Patch(Vec::with_capacity(3));
        if raw.get("spec") != Some(&spec) {
            patch
                .0
                .push(json_patch::PatchOperation::Add(json_patch::AddOperation {
                    path: json_patch::jsonptr::PointerBuf::from_tokens(["spec"]),
                    value: spec,
                }));
        }
        patch
            .0
            .extend(annotation_op(raw, DEFAULTS_ANNOTATION, record));
        // CREATE only: on UPDATE a finalizer that is missing was removed on purpose (by a user,
        // or by the reconciler finishing a deletion), and must not come back. After the
        // annotation op, which creates `metadata` when the object has none.
        if req.operation == "CREATE" {
            patch.0.extend(finalizer_op(raw));
        }
        Verdict {
            patch: Some(patch),
            ..Verdict::allow()
        }
    }

    /// Every rule, all errors at once; warnings for what is accepted but ignored.
    pub fn validate(&self, req: &Request) -> Verdict {
        let Admitted {
            parsed,
            mut errors,
            warnings,
            unchanged,
        } = match self.admit(req) {
            Ok(a) => a,
            Err(verdict) => return *verdict,
        };
        if unchanged {
            return Verdict::allow();
        }
        if req.operation == "UPDATE"
            && let Some(old) = req.old_object.as_ref().and_then(|o| self.parse_stored(o))
        {
            // The stored disks are the truth: every stored value counts as set, so nothing the
            // catalog says today can make an unchanged disk look resized.
            let old_resolved = resolve(&old.spec, None, &self.catalog);
            let new_resolved = resolve(
                &parsed.spec,
                record_for(&parsed, req).as_ref(),
                &self.catalog,
            );
            errors.extend(validate_update(&old_resolved.spec, &new_resolved.spec));
        }
        if errors.is_empty() {
            Verdict::allow().with_warnings(warnings)
        } else {
            Verdict::deny(invalid(&parsed.name, &errors)).with_warnings(warnings)
        }
    }

    /// The checks both webhooks share: operation, kind, object present, schema and types.
    /// Returns the typed object, every rule's findings, and whether an UPDATE left the spec alone.
    fn admit(&self, req: &Request) -> Result<Admitted, Box<Verdict>> {
        let deny = |msg: String| Box::new(Verdict::deny(bad_request(&msg)));
        if req.operation != "CREATE" && req.operation != "UPDATE" {
            return Err(deny(format!(
                "operation {:?} is not handled: this webhook admits Machine CREATE and UPDATE only",
                req.operation
            )));
        }
        if req.kind.group != GROUP || req.kind.kind != KIND {
            let k = &req.kind;
            let gv = if k.group.is_empty() {
                k.version.clone()
            } else {
                format!("{}/{}", k.group, k.version)
            };
            return Err(deny(format!(
                "{gv}, Kind={} is not handled: this webhook admits {GROUP}/v1alpha1, Kind={KIND} only",
                k.kind
            )));
        }
        if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
            // Status and other subresources carry no spec change to admit.
            return Err(Box::new(Verdict::allow()));
        }
        let Some(raw) = &req.object else {
            return Err(deny("AdmissionReview request has no object".to_owned()));
        };
        let name = raw
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&req.name)
            .to_owned();
        // Bounded sizes first, before anything is copied or checked item by item.
        if let Some(spec) = raw.get("spec") {
            let oversized = shape_errors(spec);
            let same_as_stored = || {
                req.old_object
                    .as_ref()
                    .is_some_and(|old| old.get("spec") == Some(spec))
            };
            if !oversized.is_empty() && !same_as_stored() {
                return Err(Box::new(Verdict::deny(invalid(&name, &oversized))));
            }
        }
        // What the checks read: the spec with nulls pruned (the API server drops them), every
        // spec field being optional so no spec means all defaults. Status is dropped by the API
        // server on writes to the main resource, and metadata is its to check.
        let mut spec = raw
            .get("spec")
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        prune_nulls(&mut spec);
        let object = serde_json::json!({ "spec": spec });
        let unchanged = req.operation == "UPDATE"
            && req.old_object.as_ref().is_some_and(|old| {
                let mut old_spec = old
                    .get("spec")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Default::default()));
                prune_nulls(&mut old_spec);
                old_spec == object["spec"]
            });
        // Annotations the reconciler acts on: an UPDATE that leaves the spec alone may still
        // set one, so they are checked before that shortcut.
        let old_object = (req.operation == "UPDATE")
            .then_some(req.old_object.as_ref())
            .flatten();
        let metadata_errors = annotation_errors(old_object, raw);
        if unchanged && !metadata_errors.is_empty() {
            return Err(Box::new(Verdict::deny(invalid(&name, &metadata_errors))));
        }
        let mut schema_errors = self.schema.check(&object);
        if !raw.is_object() {
            schema_errors.push(FieldError::type_invalid(
                &FieldPath::new("object"),
                raw.clone(),
                "must be of type object",
            ));
        }
        // Enumerations are strings in the types, so only a wrong JSON type stops typing here;
        // everything else is still validated and reported together with the schema's findings.
        match parse_spec(&object) {
            Ok(spec) => {
                let outcome = validate(&spec, &self.catalog);
                let mut errors = validate_name(&name);
                errors.extend(metadata_errors);
                errors.extend(combine(schema_errors, outcome.errors));
                let recorded = recorded_defaults(raw);
                Ok(Admitted {
                    parsed: Parsed {
                        name,
                        spec,
                        recorded,
                    },
                    errors,
                    warnings: outcome.warnings,
                    unchanged,
                })
            }
            Err(_) if unchanged => Err(Box::new(Verdict::allow())),
            Err(e) => {
                if schema_errors.is_empty() {
                    schema_errors.push(e);
                }
                let errors: Vec<FieldError> =
                    metadata_errors.into_iter().chain(schema_errors).collect();
                Err(Box::new(Verdict::deny(invalid(&name, &errors))))
            }
        }
    }

    /// A stored object (oldObject): typed without re-running the schema.
    fn parse_stored(&self, raw: &Value) -> Option<Parsed> {
        let mut object = raw.clone();
        prune_nulls(&mut object);
        let spec = parse_spec(&object).ok()?;
        let recorded = recorded_defaults(&object);
        Some(Parsed {
            name: String::new(),
            spec,
            recorded,
        })
    }
}

/// The rules' errors, plus the schema's on fields the rules did not already report. Linear: a
/// set of the rules' fields, not a comparison of every pair.
fn combine(schema: Vec<FieldError>, rules: Vec<FieldError>) -> Vec<FieldError> {
    let reported: HashSet<String> = rules.iter().map(|r| r.field.clone()).collect();
    let extra: Vec<FieldError> = schema
        .into_iter()
        .filter(|s| !reported.contains(&s.field))
        .collect();
    rules.into_iter().chain(extra).collect()
}

fn parse_spec(object: &Value) -> Result<MachineSpec, FieldError> {
    let Some(spec) = object.get("spec") else {
        return Ok(MachineSpec::default());
    };
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = format!("spec.{}", e.path()).replace(".[", "[");
        FieldError::type_invalid(&FieldPath::new(&path), Value::Null, e.inner().to_string())
    })
}

/// The object's own record, else the stored object's (a client such as `kubectl replace` may
/// have dropped the annotation).
fn record_for(parsed: &Parsed, req: &Request) -> Option<MachineSpec> {
    parsed
        .recorded
        .clone()
        .or_else(|| req.old_object.as_ref().and_then(recorded_defaults))
}

/// The template-derived values an earlier mutation recorded; unreadable records are ignored.
fn recorded_defaults(object: &Value) -> Option<MachineSpec> {
    let raw = object
        .pointer("/metadata/annotations")?
        .get(DEFAULTS_ANNOTATION)?
        .as_str()?;
    serde_json::from_str(raw).ok()
}

/// The JSON Patch operation that sets one annotation, creating the map (or metadata) as needed;
/// none when it already holds that value.
pub(super) fn annotation_op(
    object: &Value,
    key: &str,
    value: String,
) -> Option<json_patch::PatchOperation> {
    use json_patch::{AddOperation, PatchOperation, jsonptr::PointerBuf};
    let metadata = object.get("metadata").filter(|m| m.is_object());
    let annotations = metadata
        .and_then(|m| m.get("annotations"))
        .filter(|a| a.is_object());
    let (path, value) = match (metadata, annotations) {
        (_, Some(a)) if a.get(key).and_then(Value::as_str) == Some(value.as_str()) => return None,
        (_, Some(_)) => (
            PointerBuf::from_tokens(["metadata", "annotations", key]),
            Value::String(value),
        ),
        (Some(_), None) => (
            PointerBuf::from_tokens(["metadata", "annotations"]),
            serde_json::json!({ key: value }),
        ),
        (None, None) => (
            PointerBuf::from_tokens(["metadata"]),
            serde_json::json!({ "annotations": { key: value } }),
        ),
    };
    Some(PatchOperation::Add(AddOperation { path, value }))
}

/// The JSON Patch operation that appends [`FINALIZER`] to `metadata.finalizers` (creating the
/// list as needed); none when it is already there, or when the object is being deleted. Expects
/// `metadata` to exist by the time it applies (see [`annotation_op`]).
fn finalizer_op(object: &Value) -> Option<json_patch::PatchOperation> {
    use json_patch::{AddOperation, PatchOperation, jsonptr::PointerBuf};
    let metadata = object.get("metadata");
    if metadata
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null())
    {
        return None;
    }
    let (path, value) = match metadata
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
    {
        Some(list) if list.iter().any(|f| f.as_str() == Some(FINALIZER)) => return None,
        Some(_) => (
            PointerBuf::from_tokens(["metadata", "finalizers", "-"]),
            Value::String(FINALIZER.to_owned()),
        ),
        None => (
            PointerBuf::from_tokens(["metadata", "finalizers"]),
            serde_json::json!([FINALIZER]),
        ),
    };
    Some(PatchOperation::Add(AddOperation { path, value }))
}

fn failure(code: i32, reason: &str, message: String, details: Option<StatusDetails>) -> Status {
    Status {
        code: Some(code),
        reason: Some(reason.to_owned()),
        message: Some(message),
        status: Some("Failure".to_owned()),
        details,
        ..Default::default()
    }
}

/// 422 Invalid with one cause per field error, like `apierrors.NewInvalid`: the first
/// [`MAX_CAUSES`], then one cause counting the rest; every cause and the message bounded.
pub fn invalid(name: &str, errors: &[FieldError]) -> Status {
    invalid_kind(KIND, name, errors)
}

/// [`invalid`] for a kind of this group other than Machine.
pub fn invalid_kind(kind: &str, name: &str, errors: &[FieldError]) -> Status {
    let shown = &errors[..errors.len().min(MAX_CAUSES)];
    let hidden = errors.len() - shown.len();
    let mut causes: Vec<StatusCause> = shown
        .iter()
        .map(|e| StatusCause {
            field: Some(e.field.clone()),
            message: Some(truncate(&e.body(), MAX_CAUSE_BYTES).into_owned()),
            reason: Some(e.kind.cause_reason().to_owned()),
        })
        .collect();
    let more = (hidden > 0).then(|| format!("and {hidden} more errors not shown"));
    if let Some(more) = &more {
        causes.push(StatusCause {
            field: Some("spec".to_owned()),
            message: Some(more.clone()),
            reason: Some("FieldValueInvalid".to_owned()),
        });
    }
    let listed = shown
        .iter()
        .map(|e| {
            let body = e.body();
            format!("{}: {}", e.field, truncate(&body, MAX_CAUSE_BYTES))
        })
        .chain(more)
        .collect::<Vec<_>>();
    let joined = match listed.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let details = StatusDetails {
        name: (!name.is_empty()).then(|| name.to_owned()),
        group: Some(GROUP.to_owned()),
        kind: Some(kind.to_owned()),
        causes: Some(causes),
        ..Default::default()
    };
    failure(
        422,
        "Invalid",
        truncate(
            &format!("{kind}.{GROUP} {name:?} is invalid: {joined}"),
            MAX_MESSAGE_BYTES,
        )
        .into_owned(),
        Some(details),
    )
}

/// 413 for a review over [`super::limits`]: refused before it is decoded.
pub fn too_large(exceeded: Exceeded) -> Status {
    failure(
        413,
        "RequestEntityTooLarge",
        format!("{KIND}.{GROUP} is too large to admit: {exceeded}"),
        None,
    )
}

pub fn bad_request(message: &str) -> Status {
    failure(400, "BadRequest", message.to_owned(), None)
}

fn internal(message: &str) -> Status {
    failure(500, "InternalError", message.to_owned(), None)
}

#[cfg(test)]
mod tests;
