//! The VirtualMachineInstance: only its volumes' names and its status are read (phase, node,
//! interfaces, conditions, volumes and the migration in progress or last done).

use serde::{Deserialize, Serialize};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::KubeVirtCondition;

foreign_resource! {
    /// A VirtualMachineInstance; its spec is KubeVirt's copy of the VM's (plus the volumes
    /// KubeVirt hot-plugged), of which only the volumes' names are read.
    #[kube(
        group = "kubevirt.io",
        version = "v1",
        kind = "VirtualMachineInstance",
        plural = "virtualmachineinstances",
        namespaced,
        status = "VirtualMachineInstanceStatus"
    )]
    pub struct VirtualMachineInstanceSpec {
        /// The volumes the running VMI has: a disk not among them waits for a hot-plug or a
        /// restart.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub volumes: Vec<VmiVolume>,
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct VmiVolume {
    pub name: String,
}

/// KubeVirt's `status.volumeStatus[]`: where each volume's attachment stands.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStatus {
    pub name: String,
    /// Pending, Bound, AttachedToNode, MountedToPod, Ready, Detaching, UnMountedFromPod, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Set for a hot-plugged volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotplug_volume: Option<HotplugVolumeStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HotplugVolumeStatus {
    /// The pod that attaches the volume to the VMI's node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach_pod_name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceStatus {
    /// Pending, Scheduling, Scheduled, Running, Succeeded, Failed or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The node a drain asks the VMI to leave (KubeVirt's eviction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evacuation_node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<VmiInterfaceStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KubeVirtCondition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_status: Vec<VolumeStatus>,
    /// The live migration in progress, or the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_state: Option<MigrationState>,
    /// From the guest agent, while it is connected.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "guestOSInfo"
    )]
    pub guest_os_info: Option<GuestOsInfo>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GuestOsInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_release: Option<String>,
}

/// KubeVirt's `status.migrationState`, reduced to what the Machine shows.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MigrationState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Time>,
    #[serde(default)]
    pub completed: bool,
    #[serde(default)]
    pub failed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VmiInterfaceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The interface's name inside the guest (from the guest agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_name: Option<String>,
}

/// VMI phases KubeVirt reports.
pub mod vmi_phase {
    pub const RUNNING: &str = "Running";
    pub const FAILED: &str = "Failed";
    pub const SUCCEEDED: &str = "Succeeded";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_known_fields_of_a_full_vmi() {
        let vmi: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"domain": {"devices": {}}},
            "status": {"phase": "Running", "nodeName": "n1", "guestOSInfo": {"id": "fedora"},
                       "interfaces": [{"name": "default", "ipAddress": "10.0.0.1", "ipAddresses": ["10.0.0.1", "fd00::1"], "mac": "x"}]}
        }))
        .unwrap();
        let status = vmi.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.interfaces[0].ip_addresses.len(), 2);
    }
}
