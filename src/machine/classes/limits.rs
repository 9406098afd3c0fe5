//! A class's limits on a Machine's overrides. Checked on the values the Machine ends up with
//! (its own, else the class's), so a class's own values always pass ([`super::check`] makes sure).
//!
//! Like Kubernetes' validation ratcheting, a value an UPDATE leaves as it was stored is not
//! checked again: an admin who tightens a class's limits bounds new requests, and a Machine
//! already above them can still be updated in every other way.

use crate::api::MachineSpec;

use super::super::field_error::{FieldError, FieldPath};
use super::class::{Class, Limits};

/// Where the limits come from, named in every message.
pub struct Bounds<'a> {
    pub limits: &'a Limits,
    pub class: &'a str,
}

/// Every value of `spec` (sized from `class`) outside `bounds`, except those unchanged from
/// `stored` (the Machine as stored, on UPDATE).
pub fn limit_errors(
    spec: &MachineSpec,
    class: &Class,
    bounds: &Bounds,
    stored: Option<&MachineSpec>,
) -> Vec<FieldError> {
    let l = bounds.limits;
    let mut errors = Vec::new();
    if l.is_empty() {
        return errors;
    }
    let why = |limit: &str| format!("limits.{limit} of MachineClass {:?}", bounds.class);
    let cpu = spec.resources.as_ref().and_then(|r| r.cpu.as_ref());
    let stored_cpu = stored
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.cpu.as_ref());
    let root = FieldPath::new("spec");
    let resources = root.child("resources");
    let cpu_path = resources.child("cpu");
    for (field, limit, max, value, own, was) in [
        (
            "cores",
            "cpu.maxCores",
            l.max_cores,
            cpu.and_then(|c| c.cores),
            class.cores,
            stored_cpu.and_then(|c| c.cores),
        ),
        (
            "threads",
            "cpu.maxThreads",
            l.max_threads,
            cpu.and_then(|c| c.threads),
            class.threads,
            stored_cpu.and_then(|c| c.threads),
        ),
        (
            "sockets",
            "cpu.maxSockets",
            l.max_sockets,
            cpu.and_then(|c| c.sockets),
            class.sockets,
            stored_cpu.and_then(|c| c.sockets),
        ),
    ] {
        let value = value.unwrap_or(own);
        if let Some(max) = max
            && value > max
            && was != Some(value)
        {
            errors.push(FieldError::invalid(
                &cpu_path.child(field),
                value,
                format!("must be at most {max}: {}", why(limit)),
            ));
        }
    }

    let memory = spec
        .resources
        .as_ref()
        .and_then(|r| r.memory.as_ref())
        .and_then(|m| m.size.as_ref())
        .unwrap_or(&class.memory);
    let stored_memory = stored
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.memory.as_ref())
        .and_then(|m| m.size.as_ref());
    if let Ok(amount) = memory.parse()
        && stored_memory.and_then(|q| q.parse().ok()) != Some(amount)
    {
        let memory_path = resources.child("memory");
        let path = memory_path.child("size");
        if let Some(min) = &l.memory_min
            && amount < min.amount
        {
            let detail = format!("must be at least {}: {}", min.text, why("memory.min"));
            errors.push(FieldError::invalid(&path, memory.as_str(), detail));
        }
        if let Some(max) = &l.memory_max
            && amount > max.amount
        {
            let detail = format!("must be at most {}: {}", max.text, why("memory.max"));
            errors.push(FieldError::invalid(&path, memory.as_str(), detail));
        }
    }

    let disks_path = root.child("disks");
    if let Some(max) = l.max_count {
        let from_class = class
            .disks
            .iter()
            .filter(|d| !has_disk(spec, &d.name))
            .count();
        let count = spec.disks.len() + from_class;
        let stored_count = stored.map(|s| s.disks.len());
        if count > max && stored_count.is_none_or(|n| count > n) {
            let mut e = FieldError::too_many(&disks_path, count, max);
            e.detail = format!(
                "{count}: must have at most {max} disks, the class's included: {}",
                why("disks.maxCount")
            );
            errors.push(e);
        }
    }
    if let Some(max) = &l.max_size {
        for (i, disk) in spec.disks.iter().enumerate() {
            let Some(size) = &disk.size else { continue };
            let Ok(amount) = size.parse() else { continue };
            let was = stored
                .and_then(|s| s.disks.iter().find(|d| d.name == disk.name))
                .and_then(|d| d.size.as_ref())
                .and_then(|q| q.parse().ok());
            if amount > max.amount && was != Some(amount) {
                errors.push(FieldError::invalid(
                    &disks_path.index(i).child("size"),
                    size.as_str(),
                    format!("must be at most {}: {}", max.text, why("disks.maxSize")),
                ));
            }
        }
    }
    errors
}

fn has_disk(spec: &MachineSpec, name: &str) -> bool {
    spec.disks.iter().any(|d| d.name == name)
}

#[cfg(test)]
mod tests;
