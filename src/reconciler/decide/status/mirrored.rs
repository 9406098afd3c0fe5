//! KubeVirt's own conditions, mirrored on the Machine as KubeVirt words them: RestartRequired
//! from the VM while it holds, LiveMigratable and AgentConnected from the VMI; and the VMI's
//! guest addresses.

use super::super::{guest, migration, provisioning, restart};
use super::{Cond, Reconciled, condition};

pub(super) fn conditions(r: &Reconciled) -> Vec<Cond> {
    let mut out = Vec::new();
    if let Some((reason, message)) = restart::restart_required(r.vm) {
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
