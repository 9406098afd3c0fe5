//! The `vitistack.io/v1alpha1` Machine resource: what users write and what the operator reports.
//!
//! Enumerated fields are strings here on purpose: a wrong value must still deserialise so that
//! validation can report it together with every other error (see `machine::validation`). The CRD
//! schema carries the enums too, so `kubectl explain` and the API server know them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::clone_from::CloneFrom;
use super::domain::Domain;
use super::hardware::{Device, Hugepages, MAX_CLASS_DEVICES, MAX_CPU_MODEL};
use super::operations::{GuestInfo, InterfaceStatus, RUN_STRATEGIES, UPDATE_STRATEGIES};
use super::placement::{EVICTION_STRATEGIES, MigrationStatus, Placement};
use super::quantity::Quantity;
use super::schema::required_without_default;
use super::snapshots::{MAX_SNAPSHOT_REFS, SnapshotRef, SnapshotSchedule};
use super::source::{Cdrom, DiskSource, DiskStatus, MAX_CDROMS, MAX_DISK_STATUSES};

/// A virtual machine on KubeVirt, sized from a template and optional overrides.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vitistack.io",
    version = "v1alpha1",
    kind = "Machine",
    plural = "machines",
    shortname = "m",
    namespaced,
    status = "MachineStatus",
    doc = "A virtual machine on KubeVirt: a template, overrides, disks, networks and cloud-init.",
    printcolumn = r#"{"name":"Template","type":"string","jsonPath":".spec.template"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Storage","type":"string","description":"Provisioning: the StorageReady reason (a CDI phase while an image imports)","jsonPath":".status.conditions[?(@.type==\"StorageReady\")].reason"}"#,
    printcolumn = r#"{"name":"VM","type":"string","jsonPath":".status.vmName"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"IP","type":"string","jsonPath":".status.ipAddresses[0]"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The size: a MachineClass's name (kubectl get mc), or a built-in one: small (1 core, 2Gi,
    /// 20Gi root disk), medium (2 cores, 4Gi, 40Gi) or large (4 cores, 8Gi, 80Gi). Unset: the
    /// class marked default, else the operator's default template (medium). The class's values
    /// are recorded in the Machine: editing or deleting the class later never changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,

    /// CPU and memory; each field set here overrides the class's value, within its limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,

    /// Disks, merged with the template's disks by name: a disk named like a template disk
    /// overrides only the fields it sets; other names are added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_DISKS))]
    pub disks: Vec<Disk>,

    /// Network interfaces, each attached to a NetworkConfiguration. None: the pod network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_NETWORKS))]
    pub networks: Vec<Network>,

    /// Read-only installer media (CD-ROMs), each imported or cloned by CDI. May be added and
    /// removed; a CD-ROM's source is immutable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_CDROMS))]
    pub cdroms: Vec<Cdrom>,

    /// Boot device order, from disk, network and cdrom, without repeats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("items" = {"type": "string", "enum": BOOT_DEVICES}, "maxItems" = MAX_BOOT_ORDER))]
    pub boot_order: Vec<String>,

    /// Cloud-init data for the guest: inline, or from a Secret in the Machine's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<CloudInit>,

    /// Virtual hardware: machine type, features and firmware.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<Domain>,

    /// Whether the VM should run (runStrategy Always) or stay halted. Default true; with
    /// runStrategy set, unset or agreeing with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,

    /// Always, Halted (stopped, every disk kept), RerunOnFailure or Manual, as KubeVirt runs
    /// them. Unset: `running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = RUN_STRATEGIES))]
    pub run_strategy: Option<String>,

    /// What a node drain does to the VM: LiveMigrate, LiveMigrateIfPossible, External or None
    /// (KubeVirt's cluster default). Unset: the operator's --default-eviction-strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = EVICTION_STRATEGIES))]
    pub eviction_strategy: Option<String>,

    /// Where the VM may run: node selector, affinity, tolerations and priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,

    /// Not a Machine's to set: GPUs come from its MachineClass (spec.gpus of the class), and a
    /// Machine that lists any is refused. Here so the refusal names the field instead of the
    /// API server dropping it unseen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_CLASS_DEVICES))]
    pub gpus: Vec<Device>,

    /// Not a Machine's to set, like `gpus`: host devices come from its MachineClass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_CLASS_DEVICES))]
    pub host_devices: Vec<Device>,

    /// How changes that need a restart are applied: Manual (default; the RestartRequired
    /// condition says one waits) or Restart (the operator restarts the VM once to apply them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = UPDATE_STRATEGIES))]
    pub update_strategy: Option<String>,

    /// Scheduled snapshots of every disk (MachineSnapshots named `<machine>-<yyyymmddhhmm>`, or
    /// a suffixed name when that one is held by another object), and how many of them are kept.
    /// Runs closer than the operator's minimum interval (15 min by default) are skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<SnapshotSchedule>,

    /// Create this Machine as a copy of another (see docs/user): immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_from: Option<CloneFrom>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Resources {
    /// CPU topology; each field overrides the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// Guest memory; overrides the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Cores per socket, 1-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = CORES.0, "maximum" = CORES.1))]
    pub cores: Option<i64>,
    /// Threads per core, 1-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = THREADS.0, "maximum" = THREADS.1))]
    pub threads: Option<i64>,
    /// Sockets, 1-16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = SOCKETS.0, "maximum" = SOCKETS.1))]
    pub sockets: Option<i64>,
    /// Most sockets, 1-16. Set: socket changes up to it apply to the running VM (CPU
    /// hot-plug); immutable while the VM runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = SOCKETS.0, "maximum" = SOCKETS.1))]
    pub max_sockets: Option<i64>,
    /// Pin each vCPU to a host CPU of its own (KubeVirt's dedicatedCpuPlacement). A Machine
    /// may differ from its class only where the class's limits.cpu.allowDedicated says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedicated: Option<bool>,
    /// The CPU model the guest sees (e.g. host-passthrough, Skylake-Server); unset: KubeVirt's
    /// cluster default. A Machine may name only its class's own or one of limits.cpu.models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = MAX_CPU_MODEL))]
    pub model: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// Guest memory as a Kubernetes quantity, at least 64Mi (e.g. 4Gi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// Most guest memory. Set: size changes up to it apply to the running VM (memory
    /// hot-plug); immutable while the VM runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<Quantity>,
    /// Back guest memory with hugepages of this size (a class's field: a Machine gets its
    /// class's and cannot set its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<Hugepages>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name"]), transform = required_without_default)]
pub struct Disk {
    /// Disk name, a DNS-1123 label unique within the Machine. The PVC is `<machine>-<name>`.
    #[serde(default)]
    pub name: String,
    /// Size as a Kubernetes quantity (e.g. 100Gi). May grow on update, never shrink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// StorageClass of the PVC; unset uses the cluster's default StorageClass. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// ReadWriteOnce (default), ReadWriteMany or ReadOnlyMany. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ACCESS_MODES))]
    pub access_mode: Option<String>,
    /// Filesystem (default) or Block. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = VOLUME_MODES))]
    pub volume_mode: Option<String>,
    /// Content to import or clone into the disk once, through a CDI DataVolume; unset: a blank
    /// disk. Immutable. A clone (pvc, dataSource) without a size takes the source's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<DiskSource>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "networkName"]), transform = required_without_default)]
pub struct Network {
    /// Interface name, a DNS-1123 label unique within the Machine.
    #[serde(default)]
    pub name: String,
    /// Name of a NetworkConfiguration in the Machine's namespace.
    #[serde(default)]
    pub network_name: String,
    /// NIC model: virtio (default), e1000 or rtl8139.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = NIC_MODELS))]
    pub model: Option<String>,
    /// Unicast MAC address (e.g. 52:54:00:12:34:56), unique within the Machine. Unset: assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// Static addresses as CIDRs (e.g. 10.0.0.5/24), each unique within the NetworkConfiguration
    /// and inside its ipam subnet when it has one. Unset on a network with ipam: assigned from
    /// its ranges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_ADDRESSES, "items" = {"type": "string", "maxLength": 43}))]
    pub addresses: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudInit {
    /// Inline cloud-init user data. Wins over secretRef when both are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// Inline cloud-init network data, at most 16 KiB; over 2048 bytes it reaches the VM through
    /// the Secret <machine>-cloudinit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<String>,
    /// A Secret in the Machine's namespace that holds the user data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyRef>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("required" = ["name"]), transform = required_without_default)]
pub struct SecretKeyRef {
    /// Secret name.
    #[serde(default)]
    pub name: String,
    /// Key within the Secret; default `userdata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// What the operator observed and did; written by the reconciler only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Pending, Creating, Running, Stopped or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Ready, VirtualMachineReady, StorageReady, NetworkReady and (mirrored from KubeVirt)
    /// RestartRequired and LiveMigratable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Name of the KubeVirt VirtualMachine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_name: Option<String>,
    /// Name of the running VirtualMachineInstance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmi_name: Option<String>,
    /// Guest IP addresses reported by the VMI.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// Node that runs the VMI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Each disk and CD-ROM: its claim and what provisioning it is doing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_DISK_STATUSES))]
    pub disks: Vec<DiskStatus>,
    /// The KubeVirt VirtualMachine's printableStatus (Provisioning, Starting, Running, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_status: Option<String>,
    /// The VMI's current or last live migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationStatus>,
    /// Each interface of the VMI: MAC, addresses and its name in the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_INTERFACE_STATUSES))]
    pub interfaces: Vec<InterfaceStatus>,
    /// The guest's operating system, while its agent is connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<GuestInfo>,
    /// The `vitistack.io/restarted-at` value last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restart: Option<String>,
    /// The generation whose pending changes `updateStrategy: Restart` last restarted the VM
    /// to apply (at most one such restart per generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restart_generation: Option<i64>,

    /// The Machine's newest MachineSnapshots, newest first, then those of earlier Machines of
    /// its name (`earlierMachine`), newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_SNAPSHOT_REFS))]
    pub snapshots: Vec<SnapshotRef>,
    /// The KubevirtConfig whose cluster runs the VM, recorded on the first status write and
    /// never changed; unset for a Machine on the operator's own cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The identity (kube-system namespace uid) of that cluster when the VM was made there. A
    /// KubevirtConfig that reaches another cluster since leaves the Machine alone
    /// (`ClusterReady=False`, ClusterChanged) until an admin acknowledges the move on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_identity: Option<String>,
}

/// The Machine's networks plus the pod network, with room to spare.
pub const MAX_INTERFACE_STATUSES: usize = 64;

pub const CORES: (i64, i64) = (1, 256);
pub const THREADS: (i64, i64) = (1, 8);
pub const SOCKETS: (i64, i64) = (1, 16);
pub const ACCESS_MODES: &[&str] = &["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"];
pub const VOLUME_MODES: &[&str] = &["Filesystem", "Block"];
pub const NIC_MODELS: &[&str] = &["virtio", "e1000", "rtl8139"];
pub const BOOT_DEVICES: &[&str] = &["disk", "network", "cdrom"];
/// KubeVirt's own limit on disks per VMI (virt-api's `arrayLenMax`).
pub const MAX_DISKS: usize = 256;
/// Interfaces per Machine: far more than a real VM attaches, far below PCI exhaustion.
pub const MAX_NETWORKS: usize = 32;
/// Addresses per network interface.
pub const MAX_ADDRESSES: usize = 8;
/// Three boot device kinds, none repeated.
pub const MAX_BOOT_ORDER: usize = 3;
