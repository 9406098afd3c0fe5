//! A MachineClass on its own: its sizes are ones a Machine could have, and its limits admit its
//! own values (a class whose Machines could not be created with no override is a mistake). The
//! rule across classes (at most one default) is in [`super::set`].

use std::collections::HashSet;

use serde_json::Value;

use crate::api::machine::{CORES, MAX_DISKS, SOCKETS, THREADS};
use crate::api::machine_class::{
    ClassLimits, MAX_CLASS_DISKS, MAX_DESCRIPTION, MAX_DISPLAY_NAME, MachineClassSpec,
};
use crate::api::names::CLOUD_INIT_VOLUME;
use crate::api::quantity::{Amount, Quantity};

use super::super::field_error::{FieldError, FieldPath};
use super::super::names::{dns1123_label, dns1123_subdomain};
use super::super::sizes::MIN_MEMORY;
use super::super::sizes::claim_size_problem;
use super::hardware::check_hardware;

/// Every problem with `spec`, with field paths below `spec`.
pub fn check_class(spec: &MachineClassSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let root = FieldPath::new("spec");
    if spec.display_name.as_ref().map_or(0, String::len) > MAX_DISPLAY_NAME {
        errors.push(FieldError::too_long(
            &root.child("displayName"),
            MAX_DISPLAY_NAME,
        ));
    }
    if spec.description.as_ref().map_or(0, String::len) > MAX_DESCRIPTION {
        errors.push(FieldError::too_long(
            &root.child("description"),
            MAX_DESCRIPTION,
        ));
    }
    if spec.default == Some(true) && spec.enabled == Some(false) {
        errors.push(FieldError::invalid(
            &root.child("default"),
            true,
            "a disabled class cannot be the default (spec.enabled is false)",
        ));
    }
    let cpu_path = root.child("cpu");
    let cpu = spec.cpu.clone().unwrap_or_default();
    if cpu.cores.is_none() {
        errors.push(FieldError::required(
            &cpu_path.child("cores"),
            "every class sets its cores",
        ));
    }
    for (name, value, range) in [
        ("cores", cpu.cores, CORES),
        ("threads", cpu.threads, THREADS),
        ("sockets", cpu.sockets, SOCKETS),
    ] {
        check_range(&mut errors, &cpu_path.child(name), value, range);
    }
    let memory_path = root.child("memory");
    let memory_spec = spec.memory.clone().unwrap_or_default();
    for (path, set, machines) in [
        (
            cpu_path.child("maxSockets"),
            cpu.max_sockets.is_some(),
            "cpu.maxSockets",
        ),
        (
            memory_path.child("maxSize"),
            memory_spec.max_size.is_some(),
            "memory.maxSize",
        ),
    ] {
        if set {
            errors.push(FieldError::forbidden(
                &path,
                format!("a class sets no hot-plug maximum: each Machine sets its own (spec.resources.{machines})"),
            ));
        }
    }
    let size_path = memory_path.child("size");
    let memory = match memory_spec.size.as_ref() {
        None => {
            errors.push(FieldError::required(
                &size_path,
                "every class sets its memory",
            ));
            None
        }
        Some(q) => at_least(&mut errors, &size_path, q, MIN_MEMORY, "64Mi"),
    };
    let disk_sizes = check_disks(&mut errors, &root, spec);
    check_hardware(&mut errors, &root, spec, memory);
    if let Some(limits) = &spec.limits {
        check_limits(
            &mut errors,
            &root.child("limits"),
            limits,
            spec,
            memory,
            &disk_sizes,
        );
    }
    errors
}

fn check_range(
    errors: &mut Vec<FieldError>,
    path: &FieldPath,
    v: Option<i64>,
    (min, max): (i64, i64),
) {
    if let Some(v) = v
        && !(min..=max).contains(&v)
    {
        errors.push(FieldError::invalid(
            path,
            v,
            format!("must be between {min} and {max}, inclusive"),
        ));
    }
}

fn parsed(errors: &mut Vec<FieldError>, path: &FieldPath, q: &Quantity) -> Option<Amount> {
    q.parse()
        .map_err(|e| errors.push(FieldError::invalid(path, q.as_str(), e.to_string())))
        .ok()
}

fn at_least(
    errors: &mut Vec<FieldError>,
    path: &FieldPath,
    q: &Quantity,
    min: Amount,
    shown: &str,
) -> Option<Amount> {
    let amount = parsed(errors, path, q)?;
    if amount < min {
        errors.push(FieldError::invalid(
            path,
            q.as_str(),
            format!("must be at least {shown}"),
        ));
    }
    Some(amount)
}

/// The disks' rules; returns each sized disk's (name, size) for the limits.
fn check_disks(
    errors: &mut Vec<FieldError>,
    root: &FieldPath,
    spec: &MachineClassSpec,
) -> Vec<(String, Amount)> {
    let path = root.child("disks");
    if spec.disks.len() > MAX_CLASS_DISKS {
        errors.push(FieldError::too_many(
            &path,
            spec.disks.len(),
            MAX_CLASS_DISKS,
        ));
        return Vec::new();
    }
    let mut seen = HashSet::new();
    let mut sizes = Vec::new();
    for (i, disk) in spec.disks.iter().enumerate() {
        let p = path.index(i);
        let name_path = p.child("name");
        if disk.name.is_empty() {
            errors.push(FieldError::required(&name_path, ""));
        } else {
            for msg in dns1123_label(&disk.name) {
                errors.push(FieldError::invalid(&name_path, disk.name.as_str(), msg));
            }
            if disk.name == CLOUD_INIT_VOLUME {
                errors.push(FieldError::invalid(
                    &name_path,
                    disk.name.as_str(),
                    "is reserved for the cloud-init volume",
                ));
            }
            if !seen.insert(disk.name.as_str()) {
                errors.push(FieldError::duplicate(&name_path, disk.name.as_str()));
            }
        }
        let size_path = p.child("size");
        match &disk.size {
            None => errors.push(FieldError::required(
                &size_path,
                "a class's disks have a size",
            )),
            Some(q) => {
                if let Some(amount) = parsed(errors, &size_path, q) {
                    match claim_size_problem(amount) {
                        Some(problem) => {
                            errors.push(FieldError::invalid(&size_path, q.as_str(), problem))
                        }
                        None => sizes.push((disk.name.clone(), amount)),
                    }
                }
            }
        }
        if let Some(sc) = &disk.storage_class {
            for msg in dns1123_subdomain(sc) {
                errors.push(FieldError::invalid(
                    &p.child("storageClass"),
                    sc.as_str(),
                    msg,
                ));
            }
        }
    }
    sizes
}

/// The limits' own ranges, and that they admit the class's own values.
fn check_limits(
    errors: &mut Vec<FieldError>,
    path: &FieldPath,
    limits: &ClassLimits,
    spec: &MachineClassSpec,
    memory: Option<Amount>,
    disk_sizes: &[(String, Amount)],
) {
    let own = spec.cpu.clone().unwrap_or_default();
    if let Some(cpu) = &limits.cpu {
        let cpu_path = path.child("cpu");
        for (name, max, range, own_name, own_value) in [
            ("maxCores", cpu.max_cores, CORES, "cores", own.cores),
            (
                "maxThreads",
                cpu.max_threads,
                THREADS,
                "threads",
                own.threads.or(Some(1)),
            ),
            (
                "maxSockets",
                cpu.max_sockets,
                SOCKETS,
                "sockets",
                own.sockets.or(Some(1)),
            ),
        ] {
            let p = cpu_path.child(name);
            check_range(errors, &p, max, range);
            if let (Some(max), Some(value)) = (max, own_value)
                && max < value
            {
                errors.push(below_own(
                    &p,
                    max.into(),
                    &format!("spec.cpu.{own_name}"),
                    value,
                ));
            }
        }
    }
    if let Some(m) = &limits.memory {
        let memory_path = path.child("memory");
        let (min_path, max_path) = (memory_path.child("min"), memory_path.child("max"));
        let min = m
            .min
            .as_ref()
            .and_then(|q| at_least(errors, &min_path, q, MIN_MEMORY, "64Mi"));
        let max = m.max.as_ref().and_then(|q| parsed(errors, &max_path, q));
        let size = spec.memory.as_ref().and_then(|m| m.size.as_ref());
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            errors.push(FieldError::invalid(
                &min_path,
                m.min.as_ref().map_or("", Quantity::as_str),
                format!(
                    "must not be more than {} ({max_path})",
                    m.max.as_ref().map_or("", Quantity::as_str)
                ),
            ));
        }
        if let (Some(min), Some(own), Some(q)) = (min, memory, size)
            && own < min
        {
            errors.push(FieldError::invalid(
                &min_path,
                m.min.as_ref().map_or("", Quantity::as_str),
                format!("must not be more than the class's own spec.memory.size ({q})"),
            ));
        }
        if let (Some(max), Some(own), Some(q)) = (max, memory, size)
            && own > max
        {
            errors.push(below_own(
                &max_path,
                m.max.as_ref().map_or("", Quantity::as_str).into(),
                "spec.memory.size",
                q.as_str(),
            ));
        }
    }
    if let Some(d) = &limits.disks {
        let disks_path = path.child("disks");
        let count_path = disks_path.child("maxCount");
        check_range(errors, &count_path, d.max_count, (1, MAX_DISKS as i64));
        if let Some(max) = d.max_count
            && max < spec.disks.len() as i64
        {
            errors.push(FieldError::invalid(
                &count_path,
                max,
                format!(
                    "must be at least the number of the class's own disks ({})",
                    spec.disks.len()
                ),
            ));
        }
        let size_path = disks_path.child("maxSize");
        if let Some(q) = &d.max_size
            && let Some(max) = parsed(errors, &size_path, q)
        {
            if !max.is_positive() {
                errors.push(FieldError::invalid(
                    &size_path,
                    q.as_str(),
                    "must be greater than zero",
                ));
                return;
            }
            for (name, size) in disk_sizes {
                if *size > max {
                    errors.push(FieldError::invalid(
                        &size_path,
                        q.as_str(),
                        format!("must be at least the size of the class's own disk {name:?}"),
                    ));
                }
            }
        }
    }
}

fn below_own(
    path: &FieldPath,
    value: Value,
    own: &str,
    own_value: impl std::fmt::Display,
) -> FieldError {
    FieldError::invalid(
        path,
        value,
        format!("must be at least the class's own {own} ({own_value})"),
    )
}

#[cfg(test)]
mod tests;
