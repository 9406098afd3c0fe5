//! The slice of KubeVirt's `kubevirt.io/v1` API this operator writes and reads, and nothing more.
//!
//! Every field is optional and skipped when unset, so what we send is exactly what we mean to own
//! under server-side apply, and what we read back from the API keeps only these fields (which
//! keeps the operator's caches small). The shapes follow KubeVirt's CRD schema
//! (`tests/fixtures/crds/`); the integration tests have the API server check them against it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod hardware;
mod install;
mod vmi;

pub use hardware::{HostDevice, Hugepages};
pub use install::*;
pub use vmi::*;

foreign_resource! {
    /// `spec` of a KubeVirt VirtualMachine.
    #[kube(
        group = "kubevirt.io",
        version = "v1",
        kind = "VirtualMachine",
        plural = "virtualmachines",
        namespaced,
        status = "VirtualMachineStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct VirtualMachineSpec {
        /// `Always` or `Halted`; the deprecated `running` field is never written.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub run_strategy: Option<String>,
        #[serde(default)]
        pub template: VmiTemplate,
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct VmiTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default)]
    pub spec: VmiSpec,
}

/// Labels copied onto the VirtualMachineInstance, which is how VMIs are found by Machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VmiSpec {
    #[serde(default)]
    pub domain: DomainSpec,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<Network>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// What a node drain does: LiveMigrate, LiveMigrateIfPossible, External or None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<k8s_openapi::api::core::v1::Affinity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DomainSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    /// Required by KubeVirt's schema, so always written.
    #[serde(default)]
    pub devices: Devices,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Cpu {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
    /// Set: socket changes up to it are hot-plugged (KubeVirt's LiveUpdate).
    #[serde(
        rename = "maxSockets",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_sockets: Option<u32>,
    /// Each vCPU pinned to a host CPU of its own.
    #[serde(
        rename = "dedicatedCpuPlacement",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub dedicated_cpu_placement: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// A Kubernetes quantity, kept as the user wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<String>,
    /// Set: guest memory changes up to it are hot-plugged.
    #[serde(rename = "maxGuest", default, skip_serializing_if = "Option::is_none")]
    pub max_guest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<Hugepages>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineType {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<FeatureState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apic: Option<FeatureState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperv: Option<HyperV>,
    /// System Management Mode; required by Secure Boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smm: Option<FeatureState>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// The Hyper-V enlightenments KubeVirt's own Windows templates turn on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct HyperV {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaxed: Option<FeatureState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vapic: Option<FeatureState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spinlocks: Option<Spinlocks>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Spinlocks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spinlocks: Option<u32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Firmware {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<Bootloader>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Bootloader {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efi: Option<Efi>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Efi {
    /// KubeVirt defaults this to true, so it is always written explicitly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Devices {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Disk>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<HostDevice>,
    #[serde(rename = "hostDevices", default, skip_serializing_if = "Vec::is_empty")]
    pub host_devices: Vec<HostDevice>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<CdromTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_order: Option<u32>,
}

/// A CD-ROM drive; KubeVirt's schema has `bus`, `readonly` and `tray`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct CdromTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
}

/// An empty object (`{}`): KubeVirt selects bindings and network kinds by key presence.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Empty {}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<Empty>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masquerade: Option<Empty>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_order: Option<u32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Network {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Empty>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus: Option<MultusNetwork>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MultusNetwork {
    /// A NetworkAttachmentDefinition in the VM's namespace.
    pub network_name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PvcSource>,
    /// A CDI DataVolume; KubeVirt waits for its import or clone before starting the VMI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_volume: Option<DataVolumeRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_no_cloud: Option<CloudInitNoCloud>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct DataVolumeRef {
    pub name: String,
    /// Attached to a running VMI without a restart (KubeVirt's declarative hot-plug).
    #[serde(default, skip_serializing_if = "is_false")]
    pub hotpluggable: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PvcSource {
    pub claim_name: String,
    /// As [`DataVolumeRef::hotpluggable`].
    #[serde(default, skip_serializing_if = "is_false")]
    pub hotpluggable: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// KubeVirt's `CloudInitNoCloudSource`. Its Go field `UserDataSecretRef` is `secretRef` in JSON.
#[derive(Serialize, Deserialize, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CloudInitNoCloud {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<String>,
    #[serde(rename = "secretRef", default, skip_serializing_if = "Option::is_none")]
    pub user_data_secret_ref: Option<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_secret_ref: Option<LocalObjectReference>,
}

// Inline user data may hold credentials; keep it out of Debug output (and so out of logs).
impl std::fmt::Debug for CloudInitNoCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudInitNoCloud")
            .field("user_data", &self.user_data.as_ref().map(|_| "<redacted>"))
            .field(
                "network_data",
                &self.network_data.as_ref().map(|_| "<redacted>"),
            )
            .field("user_data_secret_ref", &self.user_data_secret_ref)
            .field("network_data_secret_ref", &self.network_data_secret_ref)
            .finish()
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalObjectReference {
    pub name: String,
}

/// The VirtualMachine status fields the Machine status is computed from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printable_status: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KubeVirtCondition>,
}

/// KubeVirt's condition shape (VM and VMI, and CDI's DataVolumes), reduced to what is read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeVirtCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(
        rename = "lastTransitionTime",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_transition_time: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_fields_are_not_serialized() {
        let vm = VirtualMachineSpec::default();
        assert_eq!(
            serde_json::to_value(&vm).unwrap(),
            serde_json::json!({"template": {"spec": {"domain": {"devices": {}}}}})
        );
    }

    #[test]
    fn cloud_init_debug_hides_data() {
        let c = CloudInitNoCloud {
            user_data: Some("password: hunter2".into()),
            ..Default::default()
        };
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(
            serde_json::to_value(CloudInitNoCloud {
                user_data_secret_ref: Some(LocalObjectReference { name: "s".into() }),
                ..Default::default()
            })
            .unwrap(),
            serde_json::json!({"secretRef": {"name": "s"}})
        );
    }
}
