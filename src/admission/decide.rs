//! The admission decisions, as plain functions of the request: the HTTP layer only decodes,
//! calls [`Admission::mutate`] or [`Admission::validate`], and encodes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};
use serde_json::Value;

use crate::api::MachineSpec;
use crate::machine::field_error::join;
use crate::machine::update_rules::validate_update;
use crate::machine::validation::{validate, validate_name};
use crate::machine::{Catalog, DEFAULTS_ANNOTATION, FieldError, FieldPath, resolve};

use super::review::{Request, Verdict};
use super::schema::{SchemaCheck, SchemaError, prune_nulls};

const GROUP: &str = "vitistack.io";
const KIND: &str = "Machine";

/// Everything the decisions need: the templates in force and the compiled CRD schema.
pub struct Admission {
    catalog: Catalog,
    schema: SchemaCheck,
}

/// A request's object, checked and typed.
struct Parsed {
    name: String,
    /// The object with nulls pruned, as the API server will store it.
    object: Value,
    spec: MachineSpec,
    recorded: Option<MachineSpec>,
}

impl Admission {
    pub fn new(catalog: Catalog) -> Result<Self, SchemaError> {
        Ok(Admission {
            catalog,
            schema: SchemaCheck::machine()?,
        })
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Defaults and merges the template into the object, as a JSON Patch.
    pub fn mutate(&self, req: &Request) -> Verdict {
        let (parsed, unchanged) = match self.admit(req) {
            Ok(p) => p,
            Err(verdict) => return *verdict,
        };
        let mut errors = validate_name(&parsed.name);
        errors.extend(validate(&parsed.spec, &self.catalog).errors);
        if !errors.is_empty() {
            // An unchanged spec that no longer validates (stored before a rule existed) must not
            // block metadata updates such as finalizer removal: leave it alone.
            return if unchanged {
                Verdict::allow()
            } else {
                Verdict::deny(invalid(&parsed.name, &errors))
            };
        }
        let recorded = parsed
            .recorded
            .or_else(|| req.old_object.as_ref().and_then(recorded_defaults));
        let resolved = resolve(&parsed.spec, recorded.as_ref(), &self.catalog);
        let mut mutated = parsed.object;
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
        mutated["spec"] = spec;
        set_annotation(&mut mutated, DEFAULTS_ANNOTATION, record);
        let original = req.object.as_ref().unwrap_or(&Value::Null);
        Verdict {
            patch: Some(json_patch::diff(original, &mutated)),
            ..Verdict::allow()
        }
    }

    /// Every rule, all errors at once; warnings for what is accepted but ignored.
    pub fn validate(&self, req: &Request) -> Verdict {
        let (parsed, unchanged) = match self.admit(req) {
            Ok(p) => p,
            Err(verdict) => return *verdict,
        };
        if unchanged {
            return Verdict::allow();
        }
        let outcome = validate(&parsed.spec, &self.catalog);
        let mut errors = validate_name(&parsed.name);
        errors.extend(outcome.errors);
        if req.operation == "UPDATE" {
            if let Some(old) = req.old_object.as_ref().and_then(|o| self.parse_stored(o)) {
                let old_resolved = resolve(&old.spec, old.recorded.as_ref(), &self.catalog);
                let new_resolved = resolve(&parsed.spec, parsed.recorded.as_ref(), &self.catalog);
                errors.extend(validate_update(&old_resolved.spec, &new_resolved.spec));
            }
        }
        if errors.is_empty() {
            Verdict::allow().with_warnings(outcome.warnings)
        } else {
            Verdict::deny(invalid(&parsed.name, &errors)).with_warnings(outcome.warnings)
        }
    }

    /// The checks both webhooks share: operation, kind, object present, schema and types.
    /// Also says whether an UPDATE leaves the spec as it was.
    fn admit(&self, req: &Request) -> Result<(Parsed, bool), Box<Verdict>> {
        let deny = |msg: String| Box::new(Verdict::deny(bad_request(&msg)));
        if req.operation != "CREATE" && req.operation != "UPDATE" {
            return Err(deny(format!(
                "operation {:?} is not handled: this webhook admits Machine CREATE and UPDATE only",
                req.operation
            )));
        }
        if req.kind.group != GROUP || req.kind.kind != KIND {
            return Err(deny(format!(
                "kind {}/{} is not handled: this webhook admits {GROUP}/{KIND} only",
                req.kind.group, req.kind.kind
            )));
        }
        if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
            // Status and other subresources carry no spec change to admit.
            return Err(Box::new(Verdict::allow()));
        }
        let Some(raw) = &req.object else {
            return Err(deny("AdmissionReview request has no object".to_owned()));
        };
        let mut object = raw.clone();
        prune_nulls(&mut object);
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&req.name)
            .to_owned();
        let unchanged = req.operation == "UPDATE"
            && req.old_object.as_ref().is_some_and(|old| {
                let mut old = old.clone();
                prune_nulls(&mut old);
                old.get("spec") == object.get("spec")
            });
        let mut errors = self.schema.check(&object);
        if !object.is_object() {
            errors.push(FieldError::type_invalid(
                &FieldPath::new("object"),
                object.clone(),
                "must be of type object",
            ));
        }
        let spec = match errors.is_empty() {
            true => match parse_spec(&object) {
                Ok(spec) => Some(spec),
                Err(e) => {
                    errors.push(e);
                    None
                }
            },
            false => None,
        };
        match spec {
            Some(spec) => {
                let recorded = recorded_defaults(&object);
                Ok((
                    Parsed {
                        name,
                        object,
                        spec,
                        recorded,
                    },
                    unchanged,
                ))
            }
            None if unchanged => Err(Box::new(Verdict::allow())),
            None => Err(Box::new(Verdict::deny(invalid(&name, &errors)))),
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
            object,
            spec,
            recorded,
        })
    }
}

fn parse_spec(object: &Value) -> Result<MachineSpec, FieldError> {
    let Some(spec) = object.get("spec") else {
        return Ok(MachineSpec::default());
    };
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = FieldPath::new("spec")
            .child(&e.path().to_string())
            .as_str()
            .replace(".[", "[");
        FieldError::type_invalid(&FieldPath::new(&path), Value::Null, e.inner().to_string())
    })
}

/// The template-derived values an earlier mutation recorded; unreadable records are ignored.
fn recorded_defaults(object: &Value) -> Option<MachineSpec> {
    let raw = object
        .pointer("/metadata/annotations")?
        .get(DEFAULTS_ANNOTATION)?
        .as_str()?;
    serde_json::from_str(raw).ok()
}

fn set_annotation(object: &mut Value, key: &str, value: String) {
    if !object["metadata"].is_object() {
        object["metadata"] = Value::Object(Default::default());
    }
    let annotations = &mut object["metadata"]["annotations"];
    if !annotations.is_object() {
        *annotations = Value::Object(Default::default());
    }
    annotations[key] = Value::String(value);
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

/// 422 Invalid with one cause per field error, like `apierrors.NewInvalid`.
pub fn invalid(name: &str, errors: &[FieldError]) -> Status {
    let causes = errors
        .iter()
        .map(|e| StatusCause {
            field: Some(e.field.clone()),
            message: Some(e.body()),
            reason: Some(e.kind.cause_reason().to_owned()),
        })
        .collect();
    let details = StatusDetails {
        name: (!name.is_empty()).then(|| name.to_owned()),
        group: Some(GROUP.to_owned()),
        kind: Some(KIND.to_owned()),
        causes: Some(causes),
        ..Default::default()
    };
    failure(
        422,
        "Invalid",
        format!("{KIND}.{GROUP} {name:?} is invalid: {}", join(errors)),
        Some(details),
    )
}

pub fn bad_request(message: &str) -> Status {
    failure(400, "BadRequest", message.to_owned(), None)
}

fn internal(message: &str) -> Status {
    failure(500, "InternalError", message.to_owned(), None)
}
