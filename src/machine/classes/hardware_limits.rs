//! What a Machine may not ask for of its class's hardware. Devices are the admin's to hand out:
//! a Machine that lists any is refused (its `gpus` and `hostDevices` exist only for that refusal
//! to name them), as are hugepages of its own. Its own `cpu.dedicated` and `cpu.model` pass only
//! where the class's limits allow them; its nodeSelector cannot contradict the class's (which
//! wins on the VM anyway, `reconciler::decide::desired::hardware`).

use crate::api::MachineSpec;

use super::super::field_error::{FieldError, FieldPath};
use super::class::{Class, Limits};
use super::hardware::{model_errors, not_whole_pages};

/// What a Machine of `class` asks for that the class does not allow, with `limits` (the
/// class's as they are now, else as recorded). A value unchanged from `stored` is not checked
/// again, like every limit (see `super::limits`).
pub fn hardware_errors(
    spec: &MachineSpec,
    class: &Class,
    limits: &Limits,
    stored: Option<&MachineSpec>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let root = FieldPath::new("spec");
    for (field, devices, class_field) in [
        ("gpus", &spec.gpus, "gpus"),
        ("hostDevices", &spec.host_devices, "hostDevices"),
    ] {
        if !devices.is_empty() {
            errors.push(FieldError::forbidden(
                &root.child(field),
                format!(
                    "a Machine cannot ask for devices: they come from its MachineClass (spec.{class_field} of a class; kubectl get mc)"
                ),
            ));
        }
    }
    let hw = &class.hardware;
    let why = |limit: &str| format!("limits.{limit} of MachineClass {:?}", class.name);
    let resources = root.child("resources");
    let cpu_path = resources.child("cpu");
    let cpu = spec.resources.as_ref().and_then(|r| r.cpu.as_ref());
    let was = stored
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.cpu.as_ref());
    if let Some(dedicated) = cpu.and_then(|c| c.dedicated)
        && dedicated != hw.dedicated
        && !limits.allow_dedicated
        && was.and_then(|c| c.dedicated) != Some(dedicated)
    {
        errors.push(FieldError::forbidden(
            &cpu_path.child("dedicated"),
            format!(
                "the class's value ({}) stands: a Machine sets its own only where {} is true",
                hw.dedicated,
                why("cpu.allowDedicated")
            ),
        ));
    }
    if let Some(model) = cpu.and_then(|c| c.model.as_deref()) {
        let path = cpu_path.child("model");
        let format = model_errors(&path, model);
        let allowed =
            hw.model.as_deref() == Some(model) || limits.models.iter().any(|m| m == model);
        let kept = was.and_then(|c| c.model.as_deref()) == Some(model);
        if !format.is_empty() {
            errors.extend(format);
        } else if !allowed && !kept {
            let mut supported: Vec<&str> = hw.model.iter().map(String::as_str).collect();
            supported.extend(limits.models.iter().map(String::as_str));
            errors.push(if supported.is_empty() {
                FieldError::forbidden(
                    &path,
                    format!(
                        "MachineClass {:?} sets no CPU model and allows none (its limits.cpu.models is empty)",
                        class.name
                    ),
                )
            } else {
                let mut e = FieldError::not_supported(&path, model, &supported);
                e.detail = format!(
                    "{}: a Machine names only its class's own CPU model or one of {}",
                    e.detail,
                    why("cpu.models")
                );
                e
            });
        }
    }
    let memory = spec.resources.as_ref().and_then(|r| r.memory.as_ref());
    let memory_path = resources.child("memory");
    if memory.is_some_and(|m| m.hugepages.is_some()) {
        errors.push(FieldError::forbidden(
            &memory_path.child("hugepages"),
            format!(
                "hugepages come from the MachineClass (spec.memory.hugepages of MachineClass {:?})",
                class.name
            ),
        ));
    }
    if let Some(page_size) = &hw.page_size {
        let size = memory
            .and_then(|m| m.size.as_ref())
            .unwrap_or(&class.memory);
        if let Ok(amount) = size.parse()
            && let Some(problem) = not_whole_pages(amount, page_size)
        {
            errors.push(FieldError::invalid(
                &memory_path.child("size"),
                size.as_str(),
                format!(
                    "{problem}: MachineClass {:?} backs memory with hugepages",
                    class.name
                ),
            ));
        }
    }
    let selector = spec.placement.as_ref().map(|p| &p.node_selector);
    let placement = root.child("placement");
    let selector_path = placement.child("nodeSelector");
    for (key, value) in selector.into_iter().flatten() {
        if let Some(own) = hw.node_selector.get(key)
            && own != value
        {
            errors.push(FieldError::forbidden(
                &selector_path.child(key),
                format!(
                    "MachineClass {:?} sets it to {own:?}: a Machine runs on its class's nodes",
                    class.name
                ),
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests;
