//! Where a disk's or CD-ROM's content comes from (a CDI DataVolume source), and what the operator
//! reports about provisioning it.
//!
//! "Exactly one source kind" is checked by validation (`machine::sources`), not by a `oneOf` in
//! the schema, so that a violation is reported with every other error and in Kubernetes' words.

use schemars::JsonSchema;

use super::quantity::Quantity;
use serde::{Deserialize, Serialize};

/// At most this many CD-ROMs: they share the SATA bus, whose controller has six ports.
pub const MAX_CDROMS: usize = 4;
/// Upper bound of `status.disks` (disks plus CD-ROMs), so the status stays bounded in the CRD.
pub const MAX_DISK_STATUSES: usize = 256;
/// URLs longer than this are refused (the CRD bound; real image URLs are far shorter).
pub const MAX_URL_LEN: usize = 2048;
/// The claim size of an imported CD-ROM without a size: room for a dual-layer DVD image.
pub const DEFAULT_CDROM_SIZE: &str = "10Gi";
/// Registry pull methods CDI knows.
pub const PULL_METHODS: &[&str] = &["pod", "node"];

/// The content of a disk, imported or cloned once by CDI. Exactly one kind is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskSource {
    /// Import an image (qcow2, raw, iso; optionally compressed) from an http(s) URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSource>,
    /// Import a container disk image from a registry (docker:// or oci-archive://).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistrySource>,
    /// Clone an existing PersistentVolumeClaim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<ObjectRef>,
    /// Clone the volume a CDI DataSource (golden image) points at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<ObjectRef>,
    /// Clone a CSI VolumeSnapshot (CDI's snapshot clone), such as a MachineSnapshot's copy of a
    /// disk; a Machine cloned from a MachineSnapshot gets these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<ObjectRef>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["url"]))]
pub struct HttpSource {
    /// http:// or https:// URL of the image.
    #[serde(default)]
    #[schemars(extend("maxLength" = MAX_URL_LEN))]
    pub url: String,
    /// A Secret in the Machine's namespace with `accessKeyId` and `secretKey` (basic auth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalRef>,
    /// A ConfigMap in the Machine's namespace holding the CA bundle that signs the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config_map: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["url"]))]
pub struct RegistrySource {
    /// docker://… or oci-archive://… image reference.
    #[serde(default)]
    #[schemars(extend("maxLength" = MAX_URL_LEN))]
    pub url: String,
    /// A Secret in the Machine's namespace with the registry credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalRef>,
    /// pod (default: an importer pod pulls) or node (the node's container runtime pulls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = PULL_METHODS))]
    pub pull_method: Option<String>,
}

/// A namespaced object to clone from; the namespace defaults to the Machine's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("required" = ["name"]))]
pub struct ObjectRef {
    /// Object name.
    #[serde(default)]
    pub name: String,
    /// Namespace; unset: the Machine's. Another namespace needs CDI's clone permission
    /// (`create datavolumes/source` there) for the Machine's author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// An object in the Machine's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("required" = ["name"]))]
pub struct LocalRef {
    /// Object name.
    #[serde(default)]
    pub name: String,
}

/// Read-only installer media attached on the SATA bus.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("required" = ["name", "source"]))]
pub struct Cdrom {
    /// CD-ROM name, a DNS-1123 label unique among the Machine's disks and CD-ROMs. Its
    /// DataVolume is `<machine>-<name>`.
    #[serde(default)]
    pub name: String,
    /// Where the image comes from; immutable.
    #[serde(default)]
    pub source: DiskSource,
    /// Size of the claim the image is imported into; may grow, never shrink. Unset: the
    /// source's size for a clone, 10Gi for an import (CDI needs a size to import into).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
}

/// What provisioning one disk or CD-ROM is doing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskStatus {
    /// The disk's or CD-ROM's name.
    pub name: String,
    /// Its PersistentVolumeClaim.
    pub claim_name: String,
    /// CDI's DataVolume phase (ImportScheduled, ImportInProgress, CloneInProgress,
    /// WaitForFirstConsumer, Succeeded, Failed, …), or the claim's phase for a blank disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// CDI's transfer progress, e.g. `45.20%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The access mode its claim was made with (chosen from the class's StorageProfile when
    /// the disk sets none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<String>,
    /// The volume mode its claim was made with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<String>,
    /// Set when the disk is hot-plugged into the running VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotplug: Option<super::hotplug::DiskHotplug>,
}

impl DiskSource {
    /// The source kinds that are set, in field order.
    pub fn kinds(&self) -> Vec<&'static str> {
        [
            (self.http.is_some(), "http"),
            (self.registry.is_some(), "registry"),
            (self.pvc.is_some(), "pvc"),
            (self.data_source.is_some(), "dataSource"),
            (self.snapshot.is_some(), "snapshot"),
        ]
        .into_iter()
        .filter_map(|(set, kind)| set.then_some(kind))
        .collect()
    }

    /// A clone takes its size from the source; an import needs one.
    pub fn is_clone(&self) -> bool {
        self.http.is_none() && self.registry.is_none() && self.clone_ref().is_some()
    }

    /// The object a clone reads, when this is a clone.
    pub fn clone_ref(&self) -> Option<&ObjectRef> {
        (self.pvc.as_ref())
            .or(self.data_source.as_ref())
            .or(self.snapshot.as_ref())
    }
}

pub const SOURCE_KINDS: &[&str] = &["http", "registry", "pvc", "dataSource", "snapshot"];
