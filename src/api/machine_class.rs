//! The `vitistack.io/v1alpha1` MachineClass: a size the cluster admin defines (cpu, memory,
//! disks) and the bounds on what a Machine of that class may ask for on top of it. Cluster-scoped;
//! a Machine names one in `spec.template`. The rules are in `machine::classes`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::hardware::{Device, MAX_CLASS_DEVICES, MAX_CPU_MODEL};
use super::machine::{CORES, Cpu, MAX_DISKS, Memory, SOCKETS, THREADS};
use super::placement::Placement;
use super::quantity::Quantity;
use super::schema::{class_placement, required_without_default, without_hot_plug_maxima};

/// Free text is shown by `kubectl`, never parsed: bounded so a class stays small.
pub const MAX_DISPLAY_NAME: usize = 63;
pub const MAX_DESCRIPTION: usize = 1024;
/// Disks a class may give every Machine of it; a Machine adds its own up to `MAX_DISKS`.
pub const MAX_CLASS_DISKS: usize = 16;
/// CPU models a class's limits may list.
pub const MAX_CPU_MODELS: usize = 32;

/// A size the cluster admin offers, and the limits on a Machine's overrides of it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vitistack.io",
    version = "v1alpha1",
    kind = "MachineClass",
    plural = "machineclasses",
    shortname = "mc",
    doc = "A Machine size the cluster admin defines (cpu, memory, disks) and the limits on a Machine's overrides of it. Machines name it in spec.template.",
    printcolumn = r#"{"name":"Cores","type":"integer","jsonPath":".spec.cpu.cores"}"#,
    printcolumn = r#"{"name":"Memory","type":"string","jsonPath":".spec.memory.size"}"#,
    printcolumn = r#"{"name":"Root Disk","type":"string","jsonPath":".spec.disks[?(@.name==\"root\")].size"}"#,
    printcolumn = r#"{"name":"Default","type":"boolean","jsonPath":".spec.default"}"#,
    printcolumn = r#"{"name":"Enabled","type":"boolean","jsonPath":".spec.enabled"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachineClassSpec {
    /// Human-readable name, e.g. "Extra large".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = MAX_DISPLAY_NAME))]
    pub display_name: Option<String>,
    /// What the class is for, e.g. "Production databases".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = MAX_DESCRIPTION))]
    pub description: Option<String>,
    /// The class of Machines that name none (at most one class; it must be enabled). No class
    /// marked: the operator's --default-template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub default: Option<bool>,
    /// Whether new Machines may use the class. Disabling it never changes existing Machines:
    /// their size is recorded in them, and they can still be updated and deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// CPU topology: cores (required, 1-256), threads per core (1-8, default 1), sockets (1-16,
    /// default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = without_hot_plug_maxima)]
    pub cpu: Option<Cpu>,
    /// Guest memory (required, at least 64Mi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = without_hot_plug_maxima)]
    pub memory: Option<Memory>,
    /// Disks every Machine of the class gets, merged by name with the Machine's own disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_CLASS_DISKS))]
    pub disks: Vec<ClassDisk>,
    /// GPUs every Machine of the class gets (KubeVirt's domain.devices.gpus). Machines cannot
    /// ask for devices of their own: accelerators are the admin's to hand out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_CLASS_DEVICES))]
    pub gpus: Vec<Device>,
    /// Host devices (PCI or mediated, through a device plugin) every Machine of the class gets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_CLASS_DEVICES))]
    pub host_devices: Vec<Device>,
    /// Where every Machine of the class runs: nodeSelector and tolerations only. Merged with the
    /// Machine's own: the class's nodeSelector entries win (a Machine cannot leave the class's
    /// nodes), tolerations are the union.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = class_placement)]
    pub placement: Option<Placement>,
    /// Bounds on what a Machine of the class may ask for through its overrides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ClassLimits>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "size"]), transform = required_without_default)]
pub struct ClassDisk {
    /// Disk name, a DNS-1123 label unique within the class (e.g. root).
    #[serde(default)]
    pub name: String,
    /// Size as a Kubernetes quantity (e.g. 100Gi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// StorageClass of the disk's PVC; unset uses the cluster's default StorageClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClassLimits {
    /// Upper bounds of the Machine's CPU topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuLimits>,
    /// Bounds of the Machine's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryLimits>,
    /// Bounds of the Machine's disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<DiskLimits>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuLimits {
    /// Most cores per socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = CORES.0, "maximum" = CORES.1))]
    pub max_cores: Option<i64>,
    /// Most threads per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = THREADS.0, "maximum" = THREADS.1))]
    pub max_threads: Option<i64>,
    /// Most sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = SOCKETS.0, "maximum" = SOCKETS.1))]
    pub max_sockets: Option<i64>,
    /// Whether a Machine may set its own cpu.dedicated (default false: the class's stands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_dedicated: Option<bool>,
    /// The CPU models a Machine may name besides the class's own (default none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_CPU_MODELS, "items" = {"type": "string", "maxLength": MAX_CPU_MODEL}))]
    pub models: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MemoryLimits {
    /// Least memory (a quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Quantity>,
    /// Most memory (a quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Quantity>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskLimits {
    /// Most disks, the class's included (CD-ROMs are not counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1, "maximum" = MAX_DISKS))]
    pub max_count: Option<i64>,
    /// Largest size of any one disk (a quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<Quantity>,
}
