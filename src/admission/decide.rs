//! The admission decisions, as plain functions of the request: the HTTP layer only decodes,
//! calls [`Admission::mutate`] or [`Admission::validate`], and encodes.

use std::collections::HashSet;

use serde_json::Value;

use crate::access::AccessReviewer;
use crate::api::MachineSpec;
use crate::api::names::CLASS_ANNOTATION;
use crate::classes::LiveCatalog;
use crate::machine::annotations::annotation_errors;
use crate::machine::classes::Class;
use crate::machine::placement;
use crate::machine::resolve::resolve_in;
use crate::machine::update_rules::validate_update;
use crate::machine::validation::resources::running_update_errors;
use crate::machine::validation::{validate_in, validate_name};
use crate::machine::{Catalog, DEFAULTS_ANNOTATION, FieldError, FieldPath};
use crate::macs::LiveMacs;

use super::limits::shape_errors;
use super::macs;
pub use super::patch_ops::annotation_op;
use super::patch_ops::{annotations_op, finalizer_op};
use super::review::{Request, Verdict};
use super::schema::{SchemaCheck, SchemaError, prune_nulls};
use super::sizing::{Stored, class_of, over_limits, parse_spec, recorded_defaults, stored_class};
pub use super::status::{bad_request, invalid, invalid_kind, too_large};
use super::status::{internal, unavailable};

const GROUP: &str = "vitistack.io";
const KIND: &str = "Machine";

/// Everything the decisions need: the classes in force (a snapshot per request), the compiled
/// CRD schema and, when there is a cluster to ask, the access check made as the requesting user.
pub struct Admission {
    catalog: LiveCatalog,
    schema: SchemaCheck,
    access: Option<AccessReviewer>,
    /// The MAC addresses in use; none: interfaces keep what their author wrote (offline).
    macs: Option<LiveMacs>,
    /// `--default-kubevirt-config`: written into new Machines that name no cluster.
    default_cluster: Option<String>,
}

struct Admitted<'a> {
    parsed: Parsed,
    /// The schema's and the rules' findings on the object, all of them.
    errors: Vec<FieldError>,
    warnings: Vec<String>,
    unchanged: bool,
    /// The class that sizes it; none when refused (an error says why).
    class: Option<&'a Class>,
}

/// Until its first list of MachineClasses, a replica cannot tell which class a Machine gets.
const CLASSES_NOT_LOADED: &str = "this replica of kubevirt-operator has not read the MachineClasses yet (is it allowed to list and watch machineclasses.vitistack.io?); retry shortly";

/// A request's object, checked and typed.
struct Parsed {
    name: String,
    spec: MachineSpec,
    recorded: Option<MachineSpec>,
}

impl Admission {
    /// Decisions on a catalog that never changes (no cluster).
    pub fn new(catalog: Catalog) -> Result<Self, SchemaError> {
        Self::with_catalog(LiveCatalog::fixed(catalog))
    }

    /// Decisions on the catalog `catalog` holds at each request (fed by the MachineClass watch).
    pub fn with_catalog(catalog: LiveCatalog) -> Result<Self, SchemaError> {
        Ok(Admission {
            catalog,
            schema: SchemaCheck::machine()?,
            access: None,
            macs: None,
            default_cluster: None,
        })
    }

    /// Validation also asks kube-apiserver whether the author may read what the Machine refers to.
    pub fn with_access(mut self, reviewer: AccessReviewer) -> Self {
        self.access = Some(reviewer);
        self
    }

    /// Interfaces without a MAC address get a stable one, unique among the Machines `macs`
    /// follows, and a new address another Machine uses is refused.
    pub fn with_macs(mut self, macs: LiveMacs) -> Self {
        self.macs = Some(macs);
        self
    }

    /// New Machines that name no KubevirtConfig get `default` (`--default-kubevirt-config`).
    pub fn with_default_cluster(mut self, default: Option<String>) -> Self {
        self.default_cluster = default;
        self
    }

    pub fn access(&self) -> Option<&AccessReviewer> {
        self.access.as_ref()
    }

    /// The catalog in force now.
    pub fn catalog(&self) -> arc_swap::Guard<std::sync::Arc<Catalog>> {
        self.catalog.load()
    }

    /// Defaults and merges the class into the object, as a JSON Patch.
    pub fn mutate(&self, req: &Request) -> Verdict {
        let catalog = self.catalog.load();
        if !catalog.loaded() {
            return Verdict::deny(unavailable(CLASSES_NOT_LOADED));
        }
        let stored = Stored::of(req);
        let Admitted {
            parsed,
            errors,
            unchanged,
            class,
            ..
        } = match self.admit(req, &catalog, stored.as_ref()) {
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
        let Some(class) = class else {
            return Verdict::deny(internal("no MachineClass was chosen and none refused"));
        };
        let mut resolved = resolve_in(
            &parsed.spec,
            record_for(&parsed, stored.as_ref()).as_ref(),
            &class.name,
            Some(class),
        );
        if let Some(macs) = &self.macs {
            let key = macs::machine_key(req, &parsed.name);
            let old = req.old_object.as_ref();
            if let Err(e) = macs::fill(&mut resolved.spec.networks, old, &key, macs) {
                return Verdict::deny(internal(&e));
            }
        }
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
        // Only spec, the records and (on CREATE) the finalizer change. The spec is replaced
        // whole when it differs: the API server applies the patch to the object it sent, so
        // this is exact, and comparing is far cheaper than computing a minimal diff.
        let raw = req.object.as_ref().unwrap_or(&Value::Null);
        let mut patch = json_patch::Patch(Vec::with_capacity(4));
        if raw.get("spec") != Some(&spec) {
            patch
                .0
                .push(json_patch::PatchOperation::Add(json_patch::AddOperation {
                    path: json_patch::jsonptr::PointerBuf::from_tokens(["spec"]),
                    value: spec,
                }));
        }
        // The class as it is now goes into the Machine: editing or deleting the class later
        // never changes it.
        let mut records = vec![
            (DEFAULTS_ANNOTATION, record),
            (CLASS_ANNOTATION, class.record.clone()),
        ];
        // A new Machine names its cluster for good: the default in force when it was created.
        let create = req.operation == "CREATE";
        records.extend(placement::defaulted(
            create,
            raw,
            self.default_cluster.as_deref(),
        ));
        patch.0.extend(annotations_op(raw, records));
        // CREATE only: on UPDATE a finalizer that is missing was removed on purpose (by a user,
        // or by the reconciler finishing a deletion), and must not come back. After the
        // annotation ops, which create `metadata` when the object has none.
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
        let catalog = self.catalog.load();
        if !catalog.loaded() {
            return Verdict::deny(unavailable(CLASSES_NOT_LOADED));
        }
        let stored = Stored::of(req);
        let Admitted {
            parsed,
            mut errors,
            warnings,
            unchanged,
            class,
        } = match self.admit(req, &catalog, stored.as_ref()) {
            Ok(a) => a,
            Err(verdict) => return *verdict,
        };
        if unchanged {
            return Verdict::allow();
        }
        if let Some(macs) = &self.macs {
            let key = macs::machine_key(req, &parsed.name);
            let old = req.old_object.as_ref();
            match macs::duplicate_errors(&parsed.spec.networks, old, &key, macs) {
                Ok(duplicates) => errors.extend(duplicates),
                Err(why) => return Verdict::deny(unavailable(why)),
            }
        }
        if let (Some(old), Some(class)) = (stored.as_ref(), class) {
            // The stored disks are the truth: every stored value counts as set, so nothing a
            // class says today can make an unchanged disk look resized.
            let (old_name, old_class) = stored_class(old, &catalog);
            let old_resolved = resolve_in(&old.spec, None, old_name, old_class);
            let new_resolved = resolve_in(
                &parsed.spec,
                record_for(&parsed, stored.as_ref()).as_ref(),
                &class.name,
                Some(class),
            );
            errors.extend(validate_update(&old_resolved.spec, &new_resolved.spec));
            if old.running {
                errors.extend(running_update_errors(
                    &old_resolved.spec,
                    &new_resolved.spec,
                ));
            }
        }
        if errors.is_empty() {
            Verdict::allow().with_warnings(warnings)
        } else {
            Verdict::deny(invalid(&parsed.name, &errors)).with_warnings(warnings)
        }
    }

    /// The checks both webhooks share: operation, kind, object present, schema and types.
    /// Returns the typed object, every rule's findings, and whether an UPDATE left the spec alone.
    fn admit<'a>(
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
fn record_for(parsed: &Parsed, stored: Option<&Stored>) -> Option<MachineSpec> {
    parsed
        .recorded
        .clone()
        .or_else(|| stored.and_then(|s| s.defaults.clone()))
}

#[cfg(test)]
mod tests;
