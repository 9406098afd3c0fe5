//! The checks both Machine webhooks share, before either decides: operation, kind, sizes,
//! schema, types and every rule, gathered into one [`Admitted`].

use std::collections::HashSet;

use serde_json::Value;

use crate::api::MachineSpec;
use crate::machine::annotations::annotation_errors;
use crate::machine::classes::Class;
use crate::machine::validation::{validate_in, validate_name};
use crate::machine::{Catalog, FieldError, FieldPath};

use super::super::limits::shape_errors;
use super::super::review::{Request, Verdict};
use super::super::schema::prune_nulls;
use super::super::sizing::{Stored, class_of, over_limits, parse_spec, recorded_defaults};
use super::{Admission, GROUP, KIND, bad_request, invalid};

pub(super) struct Admitted<'a> {
    pub parsed: Parsed,
    /// The schema's and the rules' findings on the object, all of them.
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
    pub unchanged: bool,
    /// The class that sizes it; none when refused (an error says why).
    pub class: Option<&'a Class>,
}

/// A request's object, checked and typed.
pub(super) struct Parsed {
    pub name: String,
    pub spec: MachineSpec,
    pub recorded: Option<MachineSpec>,
}

impl Admission {
    /// The checks both webhooks share: operation, kind, object present, schema and types.
    /// Returns the typed object, every rule's findings, and whether an UPDATE left the spec alone.
    pub(super) fn admit<'a>(
        &self,
        req: &Request,
        catalog: &'a Catalog,
        stored: Option<&'a Stored>,
    ) -> Result<Admitted<'a>, Box<Verdict>> {
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
                let chosen = class_of(&spec, catalog, stored);
                let mut outcome = validate_in(&spec, chosen.as_ref().ok().copied(), catalog);
                let class = match chosen {
                    Ok(class) => {
                        let over = over_limits(&spec, class, catalog, stored, &outcome.errors);
                        outcome.errors.extend(over);
                        Some(class)
                    }
                    Err(refused) => {
                        outcome.errors.insert(0, refused);
                        None
                    }
                };
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
                    class,
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

/// The object's own record, else the stored object's (a client such as `kubectl replace` may
/// have dropped the annotation).
pub(super) fn record_for(parsed: &Parsed, stored: Option<&Stored>) -> Option<MachineSpec> {
    parsed
        .recorded
        .clone()
        .or_else(|| stored.and_then(|s| s.defaults.clone()))
}
