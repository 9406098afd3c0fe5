//! A class's hardware (GPUs, host devices, dedicated CPUs, the CPU model, hugepages and where
//! its Machines run): its own rules ([`check_hardware`]), and what a Machine of it may not ask
//! for ([`hardware_errors`]). Devices are the admin's to hand out: a Machine that lists any is
//! refused (its `gpus` and `hostDevices` exist only for that refusal to name them). Its own `cpu.dedicated` and `cpu.model` pass only where the class's limits
//! allow them; its nodeSelector cannot contradict the class's (which wins on the VM anyway).

use std::collections::HashSet;

use crate::api::hardware::{Device, HUGEPAGE_SIZES, MAX_CLASS_DEVICES, MAX_CPU_MODEL};
use crate::api::machine_class::{MAX_CPU_MODELS, MachineClassSpec};
use crate::api::quantity::{Amount, Quantity};

use super::super::field_error::{FieldError, FieldPath};
use super::super::names::{dns1123_label, qualified_name};
use super::super::scheduling::{node_selector_errors, tolerations_errors};

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
pub(super) fn model_errors(path: &FieldPath, model: &str) -> Vec<FieldError> {
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
pub(super) fn not_whole_pages(memory: Amount, page_size: &str) -> Option<String> {
    let page: Amount = Quantity::from(page_size).parse().ok()?;
    let whole = memory.is_multiple_of(page);
    (!whole).then(|| format!("must be a multiple of the hugepage size {page_size}"))
}

#[cfg(test)]
mod tests;
