//! A Machine request's class: which one sizes it (`machine::classes::choose`), the limits its
//! overrides must keep (`machine::classes::limits`), and what the stored Machine recorded.

use serde_json::Value;

use crate::api::MachineSpec;
use crate::api::names::CLASS_ANNOTATION;
use crate::machine::classes::{
    Bounds, Class, Use, choose, hardware_errors, limit_errors, recorded_class,
};
use crate::machine::{Catalog, DEFAULTS_ANNOTATION, FieldError, FieldPath};

use super::review::Request;
use super::schema::prune_nulls;

/// The Machine as stored, on UPDATE: what the user's change is measured against.
pub struct Stored {
    pub spec: MachineSpec,
    /// The class it was sized from, as recorded in it.
    pub class: Option<Class>,
    /// The values an earlier mutation filled in (`DEFAULTS_ANNOTATION`).
    pub defaults: Option<MachineSpec>,
    /// Its status names a VMI: the VM runs (or is starting, stopping or migrating).
    pub running: bool,
    /// The disks its status shows hot-plugged (`status.disks[].hotplug`): these may be removed.
    pub hotplugged: Vec<String>,
}

impl Stored {
    /// The stored Machine of an UPDATE; none on CREATE, or when it does not parse.
    pub fn of(req: &Request) -> Option<Stored> {
        if req.operation != "UPDATE" {
            return None;
        }
        let mut object = req.old_object.clone()?;
        prune_nulls(&mut object);
        let spec = parse_spec(&object).ok()?;
        let defaults_record = annotation(&object, DEFAULTS_ANNOTATION);
        let class = recorded_class(
            annotation(&object, CLASS_ANNOTATION),
            defaults_record.is_some(),
            spec.template.as_deref(),
        );
        let defaults = defaults_record.and_then(|s| serde_json::from_str(s).ok());
        let running = object
            .pointer("/status/vmiName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let hotplugged = (object.pointer("/status/disks").and_then(Value::as_array))
            .into_iter()
            .flatten()
            .filter(|d| d.get("hotplug").is_some_and(Value::is_object))
            .filter_map(|d| Some(d.get("name")?.as_str()?.to_owned()))
            .collect();
        Some(Stored {
            spec,
            class,
            defaults,
            running,
            hotplugged,
        })
    }
}

pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations")?.get(key)?.as_str()
}

/// The values an earlier mutation recorded in `object`; unreadable records are ignored.
pub fn recorded_defaults(object: &Value) -> Option<MachineSpec> {
    serde_json::from_str(annotation(object, DEFAULTS_ANNOTATION)?).ok()
}

pub fn parse_spec(object: &Value) -> Result<MachineSpec, FieldError> {
    let Some(spec) = object.get("spec") else {
        return Ok(MachineSpec::default());
    };
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = format!("spec.{}", e.path()).replace(".[", "[");
        FieldError::type_invalid(&FieldPath::new(&path), Value::Null, e.inner().to_string())
    })
}

/// The class of `spec`: the one it keeps (same `spec.template` as stored: as recorded, even
/// disabled or deleted), else the one it chooses now (it must exist and be enabled).
pub fn class_of<'a>(
    spec: &MachineSpec,
    catalog: &'a Catalog,
    stored: Option<&'a Stored>,
) -> Result<&'a Class, FieldError> {
    let name = spec
        .template
        .as_deref()
        .unwrap_or_else(|| catalog.default_name());
    let how = match stored {
        Some(s) if s.spec.template.as_deref().unwrap_or(catalog.default_name()) == name => {
            Use::Kept(s.class.as_ref())
        }
        _ => Use::New,
    };
    choose(catalog, name, how)
}

/// The class the stored Machine was sized from: its record, else the class of its name now.
pub fn stored_class<'a>(stored: &'a Stored, catalog: &'a Catalog) -> (&'a str, Option<&'a Class>) {
    let name = stored
        .spec
        .template
        .as_deref()
        .unwrap_or_else(|| catalog.default_name());
    let class = (stored.class.as_ref())
        .filter(|c| c.name == name)
        .or_else(|| catalog.class(name));
    (name, class)
}

/// The overrides of `spec` outside its class's limits, and the hardware it may not ask for: the class's limits as they are now, or
/// as recorded when the class was deleted. Fields with an error already are not checked again.
pub fn over_limits(
    spec: &MachineSpec,
    class: &Class,
    catalog: &Catalog,
    stored: Option<&Stored>,
    reported: &[FieldError],
) -> Vec<FieldError> {
    let limits = catalog
        .class(&class.name)
        .map_or(&class.limits, |c| &c.limits);
    let bounds = Bounds {
        limits,
        class: &class.name,
    };
    let mut errors = limit_errors(spec, class, &bounds, stored.map(|s| &s.spec));
    errors.extend(hardware_errors(
        spec,
        class,
        limits,
        stored.map(|s| &s.spec),
    ));
    errors.retain(|e| !reported.iter().any(|r| r.field == e.field));
    errors
}

#[cfg(test)]
mod tests;
