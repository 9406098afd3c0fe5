//! Which class sizes a Machine. A new use of a class (CREATE, or an UPDATE that names another
//! class) takes the class as it is now, and only an enabled one; a Machine that keeps its class
//! keeps the class as recorded in it when it chose it, so editing, disabling or deleting the
//! class never changes it.

use super::super::catalog::Catalog;
use super::super::field_error::{FieldError, FieldPath};
use super::super::templates::BUILT_IN;
use super::class::Class;
use super::set::Lookup;

/// How a Machine comes to its class.
#[derive(Clone, Copy, Debug)]
pub enum Use<'a> {
    /// Chosen now: the class must exist and be enabled.
    New,
    /// The class it had (UPDATE with the same `spec.template`, or a stored Machine): as
    /// recorded when there is a record, else as it is now, even disabled.
    Kept(Option<&'a Class>),
}

/// The class `name` stands for in this use, or the refusal of `spec.template`.
pub fn choose<'a>(catalog: &'a Catalog, name: &str, how: Use<'a>) -> Result<&'a Class, FieldError> {
    if let Use::Kept(Some(recorded)) = how
        && recorded.name == name
    {
        return Ok(recorded);
    }
    let path = FieldPath::new("spec");
    let path = path.child("template");
    match catalog.classes().lookup(name) {
        Lookup::Found(class) if class.enabled || matches!(how, Use::Kept(_)) => Ok(class),
        Lookup::Found(_) => Err(FieldError::not_allowed(
            &path,
            name,
            format!(
                "MachineClass {name:?} is disabled, new Machines may not use it: supported values: {}",
                quoted(catalog.classes().enabled())
            ),
        )),
        Lookup::Invalid(why) => Err(FieldError::invalid(
            &path,
            name,
            format!("MachineClass {name:?} is not usable: {why}"),
        )),
        Lookup::Unknown => Err(FieldError::not_supported(
            &path,
            name,
            catalog.classes().enabled(),
        )),
    }
}

fn quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    quoted.join(", ")
}

/// The class a stored Machine was sized from: its record (`vitistack.io/machine-class`); for a
/// Machine the webhook defaulted before classes existed (a `vitistack.io/template-defaults`
/// record only), the compiled-in template it was sized from. None for a Machine that never went
/// through the webhook, or whose record does not read.
pub fn recorded_class(
    class_record: Option<&str>,
    has_defaults_record: bool,
    template: Option<&str>,
) -> Option<Class> {
    match class_record {
        Some(record) => Class::from_record(record),
        None if has_defaults_record => {
            let name = template?;
            BUILT_IN
                .iter()
                .find(|t| t.name == name)
                .map(Class::built_in)
        }
        None => None,
    }
}

#[cfg(test)]
mod tests;
