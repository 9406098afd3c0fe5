//! MachineClass admission: a class is checked on its own (`machine::classes::check`) and against
//! the classes in force (at most one default), on CREATE and on UPDATEs that change the spec.
//! Deleting a class is never refused: the Machines of it keep the class recorded in them.

use serde_json::Value;

use crate::api::MachineClassSpec;
use crate::api::names::{GROUP, MACHINE_CLASS_KIND};
use crate::machine::classes::check_class;
use crate::machine::{FieldError, FieldPath};

use super::Admission;
use super::review::{Request, Verdict};
use super::status::{bad_request, invalid_kind, unavailable};

impl Admission {
    pub fn validate_class(&self, req: &Request) -> Verdict {
        if req.operation != "CREATE" && req.operation != "UPDATE" {
            return Verdict::deny(bad_request(&format!(
                "operation {:?} is not handled: this webhook admits MachineClass CREATE and UPDATE only",
                req.operation
            )));
        }
        if req.kind.group != GROUP || req.kind.kind != MACHINE_CLASS_KIND {
            return Verdict::deny(bad_request(&format!(
                "Kind={} is not handled: this webhook admits {GROUP}/v1alpha1, Kind={MACHINE_CLASS_KIND} only",
                req.kind.kind
            )));
        }
        if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
            return Verdict::allow();
        }
        let Some(raw) = &req.object else {
            return Verdict::deny(bad_request("AdmissionReview request has no object"));
        };
        let spec = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
        let new = spec(raw);
        if req.operation == "UPDATE" && req.old_object.as_ref().map(spec) == Some(new.clone()) {
            return Verdict::allow();
        }
        let catalog = self.catalog();
        if !catalog.loaded() {
            return Verdict::deny(unavailable(
                "this replica of kubevirt-operator has not read the MachineClasses yet; retry shortly",
            ));
        }
        let name = raw
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&req.name);
        let errors = match serde_path_to_error::deserialize::<_, Option<MachineClassSpec>>(new) {
            Ok(spec) => {
                let spec = spec.unwrap_or_default();
                let mut errors = check_class(&spec);
                errors.extend(
                    catalog
                        .classes()
                        .default_conflict(name, spec.default == Some(true)),
                );
                errors
            }
            Err(e) => {
                let path = format!("spec.{}", e.path()).replace(".[", "[");
                vec![FieldError::type_invalid(
                    &FieldPath::new(&path),
                    Value::Null,
                    e.inner().to_string(),
                )]
            }
        };
        if errors.is_empty() {
            Verdict::allow()
        } else {
            Verdict::deny(invalid_kind(MACHINE_CLASS_KIND, name, &errors))
        }
    }
}

#[cfg(test)]
mod tests;
