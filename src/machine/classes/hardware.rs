//! A class's hardware (GPUs, host devices, dedicated CPUs, the CPU model, hugepages and where
//! its Machines run): its own rules ([`check_hardware`]), and what a Machine of it may not ask
//! for ([`hardware_errors`]). Devices are the admin's to hand out: a Machine that lists any is
//! refused (its `gpus` and `hostDevices` exist only for that refusal to name them). Its own `cpu.dedicated` and `cpu.model` pass only where the class's limits
//! allow them; its nodeSelector cannot contradict the class's (which wins on the VM anyway).

use std::collections::HashSet;

use crate::api::MachineSpec;
use crate::api::hardware::{Device, HUGEPAGE_SIZES, MAX_CLASS_DEVICES, MAX_CPU_MODEL};
use crate::api::machine_class::{MAX_CPU_MODELS, MachineClassSpec};
use crate::api::quantity::{Amount, Quantity};

use super::super::field_error::{FieldError, FieldPath};
use super::super::names::{dns1123_label, qualified_name};
use super::super::scheduling::{node_selector_errors, tolerations_errors};
use super::class::{Class, Limits};

/// The rules of the class's hardware fields, with paths below `root` (`spec`); `memory` is the
/// class's memory size when it parsed.
pub fn check_hardware(
    errors: &mut Vec<FieldError>,
    root: &FieldPath,
    spec: &MachineClassSpec,
    memory: Option<Amount>,
) {
    let mut names = HashSet::new();
    for (field, devices) in [("gpus", &spec.gpus), ("hostDevices", &spec.host_devices)] {
        check_devices(errors, &root.child(field), devices, &mut names);
    }
    let cpu = spec.cpu.clone().unwrap_or_default();
    if let Some(model) = &cpu.model {
        errors.extend(model_errors(&root.child("cpu").child("model"), model));
    }
    let memory_path = root.child("memory");
    let page_size = (spec.memory.as_ref())
        .and_then(|m| m.hugepages.as_ref())
        .and_then(|h| h.page_size.as_deref());
    let page_path = memory_path.child("hugepages");
    let page_path = page_path.child("pageSize");
    if let Some(size) = page_size {
        if !HUGEPAGE_SIZES.contains(&size) {
            errors.push(FieldError::not_supported(&page_path, size, HUGEPAGE_SIZES));
        } else if let Some(memory) = memory
            && let Some(problem) = not_whole_pages(memory, size)
        {
            errors.push(FieldError::invalid(
                &memory_path.child("size"),
                (spec.memory.as_ref())
                    .and_then(|m| m.size.as_ref())
                    .map_or("", Quantity::as_str),
                problem,
            ));
        }
    }
    if let Some(p) = &spec.placement {
        let path = root.child("placement");
        errors.extend(node_selector_errors(
            &path.child("nodeSelector"),
            &p.node_selector,
        ));
        errors.extend(tolerations_errors(
            &path.child("tolerations"),
            &p.tolerations,
        ));
        for (field, set) in [
            ("affinity", p.affinity.is_some()),
            ("priorityClassName", p.priority_class_name.is_some()),
        ] {
            if set {
                errors.push(FieldError::forbidden(
                    &path.child(field),
                    format!("a class sets nodeSelector and tolerations only: each Machine sets its own spec.placement.{field}"),
                ));
            }
        }
    }
    let models = (spec.limits.as_ref())
        .and_then(|l| l.cpu.as_ref())
        .map(|c| c.models.as_slice())
        .unwrap_or_default();
    let limits = root.child("limits");
    let limits_cpu = limits.child("cpu");
    let models_path = limits_cpu.child("models");
    if models.len() > MAX_CPU_MODELS {
        errors.push(FieldError::too_many(
            &models_path,
            models.len(),
            MAX_CPU_MODELS,
        ));
    }
    let mut seen = HashSet::new();
    for (i, model) in models.iter().take(MAX_CPU_MODELS).enumerate() {
        let p = models_path.index(i);
        errors.extend(model_errors(&p, model));
        if !seen.insert(model.as_str()) {
            errors.push(FieldError::duplicate(&p, model.as_str()));
        }
    }
}

fn check_devices<'a>(
    errors: &mut Vec<FieldError>,
    path: &FieldPath,
    devices: &'a [Device],
    names: &mut HashSet<&'a str>,
) {
    if devices.len() > MAX_CLASS_DEVICES {
        errors.push(FieldError::too_many(path, devices.len(), MAX_CLASS_DEVICES));
    }
    for (i, d) in devices.iter().take(MAX_CLASS_DEVICES).enumerate() {
        let p = path.index(i);
        let name_path = p.child("name");
        if d.name.is_empty() {
            errors.push(FieldError::required(&name_path, ""));
        } else {
            for msg in dns1123_label(&d.name) {
                errors.push(FieldError::invalid(&name_path, d.name.as_str(), msg));
            }
            // KubeVirt names a VM's GPUs and host devices in one space.
            if !names.insert(d.name.as_str()) {
                errors.push(FieldError::duplicate(&name_path, d.name.as_str()));
            }
        }
        let device_path = p.child("deviceName");
        if d.device_name.is_empty() {
            errors.push(FieldError::required(
                &device_path,
                "the device plugin's resource name, e.g. nvidia.com/GA102GL_A10",
            ));
        } else {
            for msg in qualified_name(&d.device_name) {
                errors.push(FieldError::invalid(
                    &device_path,
                    d.device_name.as_str(),
                    msg,
                ));
            }
        }
    }
}

/// A CPU model as libvirt names them: letters, digits, `-`, `_` and `.`, bounded.
fn model_errors(path: &FieldPath, model: &str) -> Vec<FieldError> {
    if model.is_empty() || model.len() > MAX_CPU_MODEL {
        return vec![FieldError::invalid(
            path,
            model,
            format!("must be 1 to {MAX_CPU_MODEL} characters"),
        )];
    }
    if !model
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return vec![FieldError::invalid(
            path,
            model,
            "a CPU model name (e.g. host-passthrough, Skylake-Server) has only letters, digits, '-', '_' and '.'",
        )];
    }
    Vec::new()
}

/// Why `memory` is not a whole number of `page_size` pages (KubeVirt refuses such a VM).
fn not_whole_pages(memory: Amount, page_size: &str) -> Option<String> {
    let page: Amount = Quantity::from(page_size).parse().ok()?;
    let whole = memory.is_multiple_of(page);
    (!whole).then(|| format!("must be a multiple of the hugepage size {page_size}"))
}

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
                        "MachineClass {:?} sets no CPU model and allows none ({} is empty)",
                        class.name,
                        why("cpu.models")
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
