//! What the guest reports through its VMI (pure): each interface with its MAC, addresses and
//! name inside the guest, the operating system from the guest agent, and whether that agent is
//! connected (also why an address may be missing).

use crate::api::machine::Network;
use crate::api::operations::{GuestInfo, InterfaceStatus};
use crate::reconciler::apis::kubevirt::VirtualMachineInstanceStatus;

/// The condition KubeVirt sets on a VMI while its guest agent is connected; mirrored on the
/// Machine, False with [`AGENT_NOT_CONNECTED`] while a running VMI reports none.
pub const AGENT_CONNECTED: &str = "AgentConnected";
pub const AGENT_NOT_CONNECTED: &str = "AgentNotConnected";

/// The VMI's interfaces, at most `max` (the status schema's bound).
pub fn interfaces(vmi: &VirtualMachineInstanceStatus, max: usize) -> Vec<InterfaceStatus> {
    vmi.interfaces
        .iter()
        .take(max)
        .map(|i| {
            let mut ips = i.ip_addresses.clone();
            if ips.is_empty() {
                ips.extend(i.ip_address.clone());
            }
            InterfaceStatus {
                name: i.name.clone(),
                mac_address: i.mac.clone(),
                ip_addresses: ips,
                interface_name: i.interface_name.clone(),
                desired_addresses: Vec::new(),
            }
        })
        .collect()
}

/// `interfaces` with each spec network's addresses as `desiredAddresses`; a network with
/// addresses the VMI does not report (stopped, not yet running) is listed with those alone.
/// At most `max` in all.
pub fn with_desired(
    mut interfaces: Vec<InterfaceStatus>,
    networks: &[Network],
    max: usize,
) -> Vec<InterfaceStatus> {
    for n in networks.iter().filter(|n| !n.addresses.is_empty()) {
        let found = (interfaces.iter()).position(|i| i.name.as_deref() == Some(n.name.as_str()));
        match found {
            Some(i) => interfaces[i].desired_addresses = n.addresses.clone(),
            None if interfaces.len() < max => interfaces.push(InterfaceStatus {
                name: Some(n.name.clone()),
                desired_addresses: n.addresses.clone(),
                ..InterfaceStatus::default()
            }),
            None => {}
        }
    }
    interfaces
}

/// The guest's operating system, when the agent reported one.
pub fn guest(vmi: &VirtualMachineInstanceStatus) -> Option<GuestInfo> {
    let os = vmi.guest_os_info.as_ref()?;
    let info = GuestInfo {
        os_name: os.name.clone().filter(|s| !s.is_empty()),
        os_version: os.version.clone().filter(|s| !s.is_empty()),
        kernel_release: os.kernel_release.clone().filter(|s| !s.is_empty()),
    };
    (info != GuestInfo::default()).then_some(info)
}

/// `AgentConnected` as (status, reason, message): KubeVirt's own while it holds; False while a
/// running VMI has no connected agent; none otherwise (nothing runs to have an agent).
pub fn agent_connected(vmi: &VirtualMachineInstanceStatus) -> Option<(bool, String, String)> {
    let connected = vmi
        .conditions
        .iter()
        .find(|c| c.type_ == AGENT_CONNECTED && c.status == "True");
    if let Some(c) = connected {
        let reason = c.reason.clone().filter(|r| !r.is_empty());
        return Some((
            true,
            reason.unwrap_or_else(|| AGENT_CONNECTED.to_owned()),
            String::new(),
        ));
    }
    (vmi.phase.as_deref() == Some(crate::reconciler::apis::kubevirt::vmi_phase::RUNNING)).then(
        || {
            (
            false,
            AGENT_NOT_CONNECTED.to_owned(),
            "the guest agent (qemu-guest-agent) is not connected: the guest's operating system \
             and interface names are unknown, and addresses may be missing"
                .to_owned(),
        )
        },
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vmi(status: serde_json::Value) -> VirtualMachineInstanceStatus {
        serde_json::from_value(status).expect("VMI status")
    }

    #[test]
    fn interfaces_and_guest_follow_the_vmi() {
        let s = vmi(json!({"phase": "Running",
            "interfaces": [
                {"name": "default", "mac": "02:00:00:aa:bb:cc", "ipAddresses": ["10.0.0.5", "fd00::5"], "interfaceName": "enp1s0"},
                {"name": "eth1", "ipAddress": "192.168.1.9"}],
            "guestOSInfo": {"name": "Debian GNU/Linux", "version": "12", "kernelRelease": "6.1.0-27-amd64", "id": "debian"},
            "conditions": [{"type": "AgentConnected", "status": "True"}]}));
        assert_eq!(
            interfaces(&s, 64),
            [
                InterfaceStatus {
                    name: Some("default".into()),
                    mac_address: Some("02:00:00:aa:bb:cc".into()),
                    ip_addresses: vec!["10.0.0.5".into(), "fd00::5".into()],
                    interface_name: Some("enp1s0".into()),
                    desired_addresses: Vec::new(),
                },
                InterfaceStatus {
                    name: Some("eth1".into()),
                    ip_addresses: vec!["192.168.1.9".into()],
                    ..InterfaceStatus::default()
                },
            ]
        );
        assert_eq!(interfaces(&s, 1).len(), 1, "bounded");
        assert_eq!(
            guest(&s),
            Some(GuestInfo {
                os_name: Some("Debian GNU/Linux".into()),
                os_version: Some("12".into()),
                kernel_release: Some("6.1.0-27-amd64".into()),
            })
        );
        assert_eq!(
            agent_connected(&s).map(|(c, r, _)| (c, r)),
            Some((true, "AgentConnected".to_owned()))
        );
    }

    #[test]
    fn without_an_agent_a_running_vmi_says_why() {
        let running = vmi(json!({"phase": "Running", "guestOSInfo": {}}));
        assert_eq!(guest(&running), None);
        let (connected, reason, message) = agent_connected(&running).expect("reported");
        assert!(!connected);
        assert_eq!(reason, "AgentNotConnected");
        assert!(message.contains("addresses may be missing"), "{message}");
        assert_eq!(agent_connected(&vmi(json!({"phase": "Scheduling"}))), None);
    }
}
