//! The classes in force: the built-ins, each replaced by a MachineClass object of the same name,
//! plus the other objects; and which one is the default.
//!
//! At most one class may be marked default (the MachineClass webhook refuses a second one). When
//! several are marked anyway (created while the webhook was not running, or by two replicas at
//! the same moment), the newest one is used, as Kubernetes does with default StorageClasses.

use std::collections::HashMap;

use kube::ResourceExt;

use crate::api::MachineClass;

use super::super::field_error::{FieldError, FieldPath, join};
use super::super::templates::BUILT_IN;
use super::class::Class;

#[derive(Clone, Debug, Default)]
pub struct Classes {
    entries: HashMap<String, Entry>,
    /// The newest enabled class marked default, if any.
    default: Option<String>,
    /// Every class object marked default, by name.
    marked: Vec<String>,
    /// The enabled classes' names, sorted: what a refusal lists.
    enabled: Vec<String>,
}

#[derive(Clone, Debug)]
enum Entry {
    Usable(Box<Class>),
    /// An object that fails the class rules (written while the webhook was not running): why.
    Invalid(String),
}

/// What a name stands for.
#[derive(Debug, PartialEq)]
pub enum Lookup<'a> {
    Found(&'a Class),
    Invalid(&'a str),
    Unknown,
}

impl Classes {
    /// The compiled-in templates alone.
    pub fn built_in() -> Classes {
        Classes::with_objects(&[]).0
    }

    /// The built-ins overlaid with `objects`; the warnings say what an admin should fix.
    pub fn with_objects(objects: &[MachineClass]) -> (Classes, Vec<String>) {
        let mut entries: HashMap<String, Entry> = BUILT_IN
            .iter()
            .map(|t| {
                (
                    t.name.to_owned(),
                    Entry::Usable(Box::new(Class::built_in(t))),
                )
            })
            .collect();
        let mut warnings = Vec::new();
        let mut marked = Vec::new();
        for object in objects {
            let name = object.name_any();
            if object.spec.default == Some(true) {
                marked.push(object);
            }
            let entry = match Class::from_spec(&name, &object.spec) {
                Ok(class) => Entry::Usable(Box::new(class)),
                Err(errors) => {
                    let why = join(&errors);
                    warnings.push(format!("MachineClass {name:?} is not usable: {why}"));
                    Entry::Invalid(why)
                }
            };
            entries.insert(name, entry);
        }
        // Newest first, then by name: the same choice on every replica.
        marked.sort_by(|a, b| {
            let created = |o: &MachineClass| o.metadata.creation_timestamp.clone().map(|t| t.0);
            created(b)
                .cmp(&created(a))
                .then_with(|| a.name_any().cmp(&b.name_any()))
        });
        let default = marked
            .iter()
            .map(|o| o.name_any())
            .find(|n| matches!(entries.get(n), Some(Entry::Usable(c)) if c.enabled && c.default));
        if marked.len() > 1 {
            let names: Vec<String> = marked.iter().map(|o| o.name_any()).collect();
            warnings.push(format!(
                "MachineClasses {} are all marked default; {} is used (the newest): set spec.default to false on the others",
                names.join(", "),
                default.as_deref().unwrap_or("none of them")
            ));
        }
        let mut enabled: Vec<String> = entries
            .iter()
            .filter(|(_, e)| matches!(e, Entry::Usable(c) if c.enabled))
            .map(|(n, _)| n.clone())
            .collect();
        enabled.sort_unstable();
        let mut marked: Vec<String> = marked.iter().map(|o| o.name_any()).collect();
        marked.sort_unstable();
        let classes = Classes {
            entries,
            default,
            marked,
            enabled,
        };
        (classes, warnings)
    }

    pub fn lookup(&self, name: &str) -> Lookup<'_> {
        match self.entries.get(name) {
            Some(Entry::Usable(c)) => Lookup::Found(c),
            Some(Entry::Invalid(why)) => Lookup::Invalid(why),
            None => Lookup::Unknown,
        }
    }

    /// The class marked default, if one is (else the operator's --default-template applies).
    pub fn marked_default(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// The enabled classes' names, sorted.
    pub fn enabled(&self) -> &[String] {
        &self.enabled
    }

    /// The refusal of class `name` marked default while another class is: `None` when `spec`
    /// is not marked default or no other class is.
    pub fn default_conflict(&self, name: &str, marked_default: bool) -> Option<FieldError> {
        if !marked_default {
            return None;
        }
        let others: Vec<&str> = (self.marked.iter())
            .map(String::as_str)
            .filter(|n| *n != name)
            .collect();
        (!others.is_empty()).then(|| {
            FieldError::forbidden(
                &FieldPath::new("spec").child("default"),
                format!(
                    "at most one MachineClass may be the default, and {} already is: set its spec.default to false first",
                    others.join(", ")
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests;
