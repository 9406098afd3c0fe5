//! A class's hardware on its Machine's VM (pure, table-tested): the class's GPUs and host
//! devices, its dedicated CPUs, CPU model and hugepages (the Machine's own `cpu.dedicated` and
//! `cpu.model` win, admission having checked that the class allows them), and placement merged
//! so that the class bounds the Machine: the class's nodeSelector entries win, tolerations are
//! the union.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;

use crate::api::hardware::Device;
use crate::api::machine::Cpu as MachineCpu;
use crate::machine::classes::Hardware;
use crate::reconciler::apis::kubevirt::{Cpu, DomainSpec, HostDevice, Hugepages};

/// Adds `hw` to `domain`; `cpu` is the Machine's resolved CPU.
pub fn apply(domain: &mut DomainSpec, cpu: Option<&MachineCpu>, hw: &Hardware) {
    domain.devices.gpus = hw.gpus.iter().map(device).collect();
    domain.devices.host_devices = hw.host_devices.iter().map(device).collect();
    let dedicated = cpu.and_then(|c| c.dedicated).unwrap_or(hw.dedicated);
    let model = cpu
        .and_then(|c| c.model.clone())
        .or_else(|| hw.model.clone());
    if dedicated || model.is_some() {
        let c = domain.cpu.get_or_insert_with(Cpu::default);
        c.dedicated_cpu_placement = dedicated.then_some(true);
        c.model = model;
    }
    if let (Some(memory), Some(size)) = (domain.memory.as_mut(), &hw.page_size) {
        memory.hugepages = Some(Hugepages {
            page_size: Some(size.clone()),
        });
    }
}

fn device(d: &Device) -> HostDevice {
    HostDevice {
        name: d.name.clone(),
        device_name: Some(d.device_name.clone()),
    }
}

/// The Machine's node selector with the class's entries over it: a Machine cannot leave its
/// class's nodes.
pub fn node_selector(
    machine: BTreeMap<String, String>,
    class: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = machine;
    out.extend(class.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// The class's tolerations, then the Machine's that are not among them.
pub fn tolerations(machine: Vec<Toleration>, class: &[Toleration]) -> Vec<Toleration> {
    let mut out = class.to_vec();
    for t in machine {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests;
