//! `spec.resources`: the CPU topology and memory ranges, and the hot-plug maxima (`maxSockets`,
//! `maxSize`) that let KubeVirt apply socket and memory changes to a running VM.

use std::cmp::Ordering;

use crate::api::MachineSpec;
use crate::api::machine::{CORES, Resources, SOCKETS, THREADS};

use super::super::field_error::{FieldError, FieldPath};
use super::super::sizes::MIN_MEMORY;
use super::{Outcome, check_quantity};

pub fn validate(out: &mut Outcome, spec_path: &FieldPath, spec: &MachineSpec) {
    let Some(res) = &spec.resources else {
        return;
    };
    let res_path = spec_path.child("resources");
    if let Some(cpu) = &res.cpu {
        let cpu_path = res_path.child("cpu");
        check_range(out, &cpu_path.child("cores"), cpu.cores, CORES);
        check_range(out, &cpu_path.child("threads"), cpu.threads, THREADS);
        check_range(out, &cpu_path.child("sockets"), cpu.sockets, SOCKETS);
        let max_path = cpu_path.child("maxSockets");
        check_range(out, &max_path, cpu.max_sockets, SOCKETS);
        if let (Some(sockets), Some(max)) = (cpu.sockets, cpu.max_sockets)
            && sockets > max
        {
            out.errors.push(FieldError::invalid(
                &cpu_path.child("sockets"),
                sockets,
                format!("must be at most spec.resources.cpu.maxSockets ({max})"),
            ));
        }
    }
    let Some(memory) = &res.memory else {
        return;
    };
    let memory_path = res_path.child("memory");
    let size_path = memory_path.child("size");
    let size = memory
        .size
        .as_ref()
        .and_then(|q| Some((q, check_quantity(out, &size_path, q)?)));
    if let Some((q, amount)) = size
        && amount < MIN_MEMORY
    {
        out.errors.push(FieldError::invalid(
            &size_path,
            q.as_str(),
            "must be at least 64Mi",
        ));
    }
    let max_path = memory_path.child("maxSize");
    let max = memory
        .max_size
        .as_ref()
        .and_then(|q| Some((q, check_quantity(out, &max_path, q)?)));
    if let (Some((q, amount)), Some((max_q, max))) = (size, max)
        && amount > max
    {
        out.errors.push(FieldError::invalid(
            &size_path,
            q.as_str(),
            format!(
                "must be at most spec.resources.memory.maxSize ({})",
                max_q.as_str()
            ),
        ));
    }
}

/// The hot-plug maxima fix the VM's topology while it runs: changing one is refused then.
pub fn running_update_errors(old: &MachineSpec, new: &MachineSpec) -> Vec<FieldError> {
    let cpu = |s: &MachineSpec| resources(s).and_then(|r| r.cpu.as_ref()?.max_sockets);
    let memory = |s: &MachineSpec| resources(s).and_then(|r| r.memory.as_ref()?.max_size.clone());
    let root = FieldPath::new("spec");
    let path = root.child("resources");
    let why = || {
        "may not change while the VM runs: stop the Machine (runStrategy: Halted), change it, \
         and start it again"
            .to_owned()
    };
    let mut errors = Vec::new();
    if cpu(old) != cpu(new) {
        errors.push(FieldError::forbidden(
            &path.child("cpu").child("maxSockets"),
            why(),
        ));
    }
    let same = match (memory(old), memory(new)) {
        (Some(a), Some(b)) => a == b || a.compare(&b) == Some(Ordering::Equal),
        (a, b) => a.is_none() && b.is_none(),
    };
    if !same {
        errors.push(FieldError::forbidden(
            &path.child("memory").child("maxSize"),
            why(),
        ));
    }
    errors
}

fn resources(s: &MachineSpec) -> Option<&Resources> {
    s.resources.as_ref()
}

pub(super) fn check_range(
    out: &mut Outcome,
    path: &FieldPath,
    value: Option<i64>,
    (min, max): (i64, i64),
) {
    if let Some(v) = value
        && !(min..=max).contains(&v)
    {
        out.errors.push(FieldError::invalid(
            path,
            v,
            format!("must be between {min} and {max}, inclusive"),
        ));
    }
}
