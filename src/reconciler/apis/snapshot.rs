//! The slice of KubeVirt's `snapshot.kubevirt.io/v1beta1` API the snapshot controller writes and
//! reads: VirtualMachineSnapshot and VirtualMachineRestore. Shapes follow KubeVirt's CRDs in
//! `tests/fixtures/crds/`, which the integration tests install so the API server checks them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

/// The object a snapshot or restore is about (always our VirtualMachine).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TypedLocalObjectReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    pub kind: String,
    pub name: String,
}

impl TypedLocalObjectReference {
    /// The KubeVirt VirtualMachine `name`.
    pub fn vm(name: &str) -> Self {
        TypedLocalObjectReference {
            api_group: Some("kubevirt.io".to_owned()),
            kind: "VirtualMachine".to_owned(),
            name: name.to_owned(),
        }
    }
}

foreign_resource! {
    #[kube(
        group = "snapshot.kubevirt.io",
        version = "v1beta1",
        kind = "VirtualMachineSnapshot",
        plural = "virtualmachinesnapshots",
        namespaced,
        status = "VirtualMachineSnapshotStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct VirtualMachineSnapshotSpec {
        pub source: TypedLocalObjectReference,
        /// `Delete` (KubeVirt's default): the content goes with the snapshot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub deletion_policy: Option<String>,
    }
}

/// KubeVirt's error record: a message and when it happened.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SnapshotError {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotVolumes {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub included_volumes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_volumes: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSnapshotStatus {
    /// InProgress, Succeeded, Failed or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<SnapshotError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_volumes: Option<SnapshotVolumes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_snapshot_content_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<SnapshotCondition>,
}

foreign_resource! {
    #[kube(
        group = "snapshot.kubevirt.io",
        version = "v1beta1",
        kind = "VirtualMachineRestore",
        plural = "virtualmachinerestores",
        namespaced,
        status = "VirtualMachineRestoreStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct VirtualMachineRestoreSpec {
        pub target: TypedLocalObjectReference,
        pub virtual_machine_snapshot_name: String,
        /// Per volume: the name of its restored claim.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub volume_restore_overrides: Vec<VolumeRestoreOverride>,
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeRestoreOverride {
    pub volume_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineRestoreStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_time: Option<Time>,
    /// Each volume restored: its new claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restores: Vec<VolumeRestore>,
    /// `Ready`, `Progressing` and `Failure` (KubeVirt's condition types).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<SnapshotCondition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeRestore {
    pub volume_name: String,
    pub persistent_volume_claim: String,
    #[serde(default)]
    pub volume_snapshot_name: String,
}

/// KubeVirt's condition shape, as the VM's (reason and message may be missing: k8s-openapi's
/// `Condition` requires them, and would refuse to decode such a status).
pub type SnapshotCondition = super::kubevirt::KubeVirtCondition;

foreign_resource! {
    #[kube(
        group = "snapshot.kubevirt.io",
        version = "v1beta1",
        kind = "VirtualMachineSnapshotContent",
        plural = "virtualmachinesnapshotcontents",
        namespaced
    )]
    #[serde(rename_all = "camelCase")]
    pub struct VirtualMachineSnapshotContentSpec {
        /// The VirtualMachineSnapshot it holds the copies of.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub virtual_machine_snapshot_name: Option<String>,
        /// Each volume's copy: its VolumeSnapshot (read by a clone from a MachineSnapshot).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub volume_backups: Vec<VolumeBackup>,
    }
}

/// One volume's copy in a VirtualMachineSnapshotContent (its claim's shape is not read).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeBackup {
    pub volume_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_name: Option<String>,
}
