//! KubeVirt's own conditions, mirrored on the Machine as KubeVirt words them: RestartRequired
//! from the VM while it holds (with why, when disks added to the running VM wait for a restart
//! instead of a hot-plug), LiveMigratable and AgentConnected from the VMI; and the VMI's guest
//! addresses.

use super::super::{guest, hotplug, migration, provisioning, restart};
use super::{Cond, Reconciled, condition};

pub(super) fn conditions(r: &Reconciled) -> Vec<Cond> {
    let mut out = Vec::new();
    let kubevirts = restart::restart_required(r.vm);
    let waiting = r.hotplug.and_then(|p| {
        let message = kubevirts.as_ref().map(|(_, m)| m.as_str());
        hotplug::restart_required(p, message)
    });
    if let Some((reason, message)) = waiting.or(kubevirts) {
        let t = provisioning::reason::RESTART_REQUIRED;
        out.push(Cond::new(t, "True", &reason, message));
    }
    let vmi = r.vmi.and_then(|v| v.status.as_ref());
    if let Some(c) = vmi.and_then(migration::live_migratable) {
        let status = if c.status == "True" { "True" } else { "False" };
        let reason = c.reason.as_deref().unwrap_or(c.type_.as_str());
        let message = c.message.clone().unwrap_or_default();
        out.push(Cond::new(
            condition::LIVE_MIGRATABLE,
            status,
            reason,
            message,
        ));
    }
    if let Some((connected, reason, message)) = vmi.and_then(guest::agent_connected) {
        let status = if connected { "True" } else { "False" };
        out.push(Cond::new(guest::AGENT_CONNECTED, status, &reason, message));
    }
    out
}

/// Guest addresses from every interface, in interface order, without repeats.
pub(super) fn ip_addresses(
    s: &crate::reconciler::apis::kubevirt::VirtualMachineInstanceStatus,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in &s.interfaces {
        let addrs = if i.ip_addresses.is_empty() {
            i.ip_address.iter().cloned().collect()
        } else {
            i.ip_addresses.clone()
        };
        for a in addrs {
            if !a.is_empty() && !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}
