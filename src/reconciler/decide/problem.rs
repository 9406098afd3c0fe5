//! One vocabulary for what stops a Machine from converging. A [`Problem`]'s [`reason`]
//! is the same word in the condition it sets, the Warning Event that announces it and the
//! `error_type` label of `reconcile_errors_total`, so the three can never disagree. The
//! condition types, phases and the reasons that are not problems live here too, so that status,
//! provisioning and Events all take them from one place.
//!
//! [`reason`]: Problem::reason

use std::fmt;

/// SPEC's Machine phases.
pub mod phase {
    pub const PENDING: &str = "Pending";
    pub const CREATING: &str = "Creating";
    pub const RUNNING: &str = "Running";
    pub const STOPPED: &str = "Stopped";
    pub const FAILED: &str = "Failed";
}

/// Condition reasons that are not problems (a [`Problem`]'s reason is its own).
pub mod reason {
    /// `Restoring`: which MachineRestore, in which step.
    pub const RESTORE_IN_PROGRESS: &str = "RestoreInProgress";
    /// `SnapshotsReady`: scheduled, and the last scheduled snapshot did not fail.
    pub const SNAPSHOTS_SCHEDULED: &str = "SnapshotsScheduled";
    pub const SNAPSHOT_FAILED: &str = "SnapshotFailed";
    /// KubeVirt's snapshot API (`snapshot.kubevirt.io`) is not served.
    pub const SNAPSHOT_API_NOT_INSTALLED: &str = "SnapshotAPINotInstalled";
    pub const VM_CREATED: &str = "VMCreated";
    pub const VM_FAILED: &str = "VMFailed";
    pub const PVC_BOUND: &str = "PVCBound";
    pub const PVC_PENDING: &str = "PVCPending";
    pub const NETWORK_CONFIGURED: &str = "NetworkConfigured";
    pub const INSUFFICIENT_RESOURCES: &str = "InsufficientResources";
    /// The VM is held back until its dependencies are in place.
    pub const VM_PENDING: &str = "VMPending";
    pub const RUNNING: &str = "Running";
    pub const CREATING: &str = "Creating";
    pub const STOPPED: &str = "Stopped";
    /// `DisksRetained`: every claim and DataVolume of a disk is free of owner references.
    pub const DISKS_RELEASED: &str = "DisksReleased";
    /// An adopted claim or DataVolume (a Normal Event).
    pub const ADOPTED: &str = "Adopted";
}

/// The condition types of SPEC's Machine status.
pub mod condition {
    pub const READY: &str = "Ready";
    pub const VIRTUAL_MACHINE_READY: &str = "VirtualMachineReady";
    pub const STORAGE_READY: &str = "StorageReady";
    pub const NETWORK_READY: &str = "NetworkReady";
    /// Shown while `vitistack.io/retain-disks` is `"true"`: whether deleting the Machine, in any
    /// propagation, now keeps every disk.
    pub const DISKS_RETAINED: &str = "DisksRetained";
    /// Shown while a MachineRestore replaces the disks: the VM and disks are left to it.
    pub const RESTORING: &str = "Restoring";
    /// Shown for a Machine with `spec.snapshots`: whether its schedule can and does work.
    pub const SNAPSHOTS_READY: &str = "SnapshotsReady";
    /// Shown for a Machine on a remote cluster: whether that cluster is worked on now.
    pub const CLUSTER_READY: &str = "ClusterReady";
    /// KubeVirt's verdict on the VMI, mirrored while a VMI reports it.
    pub const LIVE_MIGRATABLE: &str = crate::reconciler::decide::migration::LIVE_MIGRATABLE;
}

/// The kinds of object the reconciler makes (named in conflict and write-failure messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Claim,
    VirtualMachine,
    Attachment,
    Secret,
    /// A CDI DataVolume (a disk with a source, or a CD-ROM).
    DataVolume,
    /// The copy of a disk source's CA ConfigMap on a remote cluster.
    ConfigMap,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Claim => "PersistentVolumeClaim",
            Kind::VirtualMachine => "VirtualMachine",
            Kind::Attachment => "NetworkAttachmentDefinition",
            Kind::Secret => "Secret",
            Kind::DataVolume => "DataVolume",
            Kind::ConfigMap => "ConfigMap",
        }
    }
}

/// Something the user (or an administrator) has to fix, or a write that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The stored spec breaks a rule (it bypassed admission); nothing is made.
    InvalidSpec {
        template_not_found: bool,
        message: String,
    },
    StorageClassNotFound {
        disk: String,
        storage_class: String,
    },
    NetworkConfigurationNotFound {
        network: String,
        network_name: String,
    },
    NetworkInvalid {
        network_name: String,
        message: String,
    },
    /// The Machine names networks, and the NetworkAttachmentDefinition API is not served.
    MultusNotInstalled,
    /// The Machine has disks with a source or CD-ROMs (`disk root`, `cdrom installer`), and
    /// CDI's DataVolume API is not served.
    CdiNotInstalled {
        volumes: Vec<String>,
    },
    SecretNotFound {
        name: String,
    },
    SecretKeyNotFound {
        name: String,
        key: String,
    },
    /// An object with the name we want exists and is neither ours nor adoptable.
    Conflict {
        kind: Kind,
        name: String,
    },
    /// A `dataSource` volume (`disk root`) without what it clones pinned at admission (stored
    /// before this version, or past the webhook): the DataSource is not followed blindly.
    CloneSourceNotPinned {
        volume: String,
    },
    /// A remote Machine's `dataSource` (`field`, `spec.disks[0].source.dataSource`) that cannot
    /// be cloned on its `cluster`, as resolved there: nothing is made for its volume.
    DataSourceUnusable {
        field: String,
        /// `namespace/name`.
        data_source: String,
        cluster: String,
        fault: DataSourceFault,
    },
    /// CDI's admission refused a cloning DataVolume: whoever creates it (the operator) lacks
    /// `create datavolumes/source` in the source namespace.
    CloneUnauthorized {
        name: String,
        message: String,
    },
    /// retain-disks: freeing a claim or DataVolume of the Machine's owner reference failed.
    ReleaseFailed {
        kind: Kind,
        name: String,
        message: String,
    },
    /// The API server refused a write (its message, never object contents).
    WriteFailed {
        kind: Kind,
        name: String,
        message: String,
    },
}

/// Why a remote `dataSource` cannot be cloned ([`Problem::DataSourceUnusable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataSourceFault {
    /// No DataSource of that name there (or CDI's DataSource API is not served).
    Missing,
    /// It names neither a PVC nor a snapshot.
    NoSource,
    /// Its `Ready` condition is not True (CDI has not populated what it points to).
    NotReady,
    /// It (or what it points to) is in `namespace`, not the Machine's, and the KubevirtConfig
    /// does not set `allowCrossNamespaceClones: true`.
    CrossNamespace { namespace: String },
}

impl Problem {
    /// The condition reason, Event reason and metric `error_type`.
    pub fn reason(&self) -> &'static str {
        match self {
            Problem::InvalidSpec {
                template_not_found: true,
                ..
            } => "TemplateNotFound",
            Problem::InvalidSpec { .. } => "InvalidSpec",
            Problem::StorageClassNotFound { .. } => "StorageClassNotFound",
            Problem::NetworkConfigurationNotFound { .. } => "NetworkConfigurationNotFound",
            Problem::NetworkInvalid { .. } => "NetworkInvalid",
            Problem::MultusNotInstalled => "MultusNotInstalled",
            Problem::CdiNotInstalled { .. } => "CDINotInstalled",
            Problem::SecretNotFound { .. } => "SecretNotFound",
            Problem::SecretKeyNotFound { .. } => "SecretKeyNotFound",
            Problem::Conflict { kind, .. } => match kind {
                Kind::Claim => "ClaimConflict",
                Kind::VirtualMachine => "VirtualMachineConflict",
                Kind::Attachment => "NetworkAttachmentConflict",
                Kind::Secret => "SecretConflict",
                Kind::DataVolume => "DataVolumeConflict",
                Kind::ConfigMap => "ConfigMapConflict",
            },
            Problem::DataSourceUnusable { fault, .. } => match fault {
                DataSourceFault::Missing => "DataSourceNotFound",
                DataSourceFault::NoSource | DataSourceFault::NotReady => "DataSourceNotReady",
                DataSourceFault::CrossNamespace { .. } => "CrossNamespaceCloneForbidden",
            },
            Problem::CloneUnauthorized { .. } => "CloneUnauthorized",
            Problem::CloneSourceNotPinned { .. } => "CloneSourceNotPinned",
            Problem::ReleaseFailed { .. } => "ReleaseFailed",
            Problem::WriteFailed { kind, .. } => match kind {
                Kind::Claim => "PVCFailed",
                Kind::VirtualMachine => "KubeVirtApiError",
                Kind::Attachment => "NetworkFailed",
                Kind::Secret => "SecretFailed",
                Kind::DataVolume => "DataVolumeFailed",
                Kind::ConfigMap => "ConfigMapFailed",
            },
        }
    }

    /// The condition this problem sets False.
    pub fn condition(&self) -> &'static str {
        use condition::*;
        match self {
            Problem::InvalidSpec { .. } => VIRTUAL_MACHINE_READY,
            Problem::StorageClassNotFound { .. }
            | Problem::CdiNotInstalled { .. }
            | Problem::CloneUnauthorized { .. }
            | Problem::DataSourceUnusable { .. }
            | Problem::CloneSourceNotPinned { .. } => STORAGE_READY,
            Problem::NetworkConfigurationNotFound { .. }
            | Problem::NetworkInvalid { .. }
            | Problem::MultusNotInstalled => NETWORK_READY,
            Problem::SecretNotFound { .. } | Problem::SecretKeyNotFound { .. } => {
                VIRTUAL_MACHINE_READY
            }
            Problem::ReleaseFailed { .. } => DISKS_RETAINED,
            Problem::Conflict { kind, .. } | Problem::WriteFailed { kind, .. } => match kind {
                Kind::Claim | Kind::DataVolume | Kind::ConfigMap => STORAGE_READY,
                Kind::Attachment => NETWORK_READY,
                Kind::VirtualMachine | Kind::Secret => VIRTUAL_MACHINE_READY,
            },
        }
    }

    /// Whether the problem holds the VM back. A failed volume write holds back only the VM
    /// changes that need that volume (see `act::held`), a failed release nothing.
    pub fn holds_vm(&self) -> bool {
        !matches!(
            self,
            Problem::ReleaseFailed { .. }
                | Problem::WriteFailed {
                    kind: Kind::Claim | Kind::DataVolume,
                    ..
                }
                | Problem::CloneUnauthorized { .. }
        )
    }

    /// The claim or DataVolume whose write failed, if that is this problem.
    pub fn failed_volume(&self) -> Option<&str> {
        match self {
            Problem::WriteFailed {
                kind: Kind::Claim | Kind::DataVolume,
                name,
                ..
            }
            | Problem::CloneUnauthorized { name, .. } => Some(name),
            _ => None,
        }
    }

    /// Every reason a problem can have, for documentation and tests.
    pub const REASONS: &'static [&'static str] = &[
        "TemplateNotFound",
        "InvalidSpec",
        "StorageClassNotFound",
        "NetworkConfigurationNotFound",
        "NetworkInvalid",
        "MultusNotInstalled",
        "CDINotInstalled",
        "SecretNotFound",
        "SecretKeyNotFound",
        "ClaimConflict",
        "VirtualMachineConflict",
        "NetworkAttachmentConflict",
        "SecretConflict",
        "DataVolumeConflict",
        "ConfigMapConflict",
        "DataSourceNotFound",
        "DataSourceNotReady",
        "CrossNamespaceCloneForbidden",
        "CloneUnauthorized",
        "CloneSourceNotPinned",
        "ReleaseFailed",
        "PVCFailed",
        "KubeVirtApiError",
        "NetworkFailed",
        "SecretFailed",
        "DataVolumeFailed",
        "ConfigMapFailed",
    ];
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::InvalidSpec { message, .. } => f.write_str(message),
            Problem::StorageClassNotFound {
                disk,
                storage_class,
            } => write!(f, "disk {disk:?}: StorageClass {storage_class:?} not found"),
            Problem::NetworkConfigurationNotFound {
                network,
                network_name,
            } => write!(
                f,
                "network {network:?}: NetworkConfiguration {network_name:?} not found"
            ),
            Problem::NetworkInvalid { message, .. } => f.write_str(message),
            Problem::MultusNotInstalled => f.write_str(
                "the Machine names networks, and Multus (the NetworkAttachmentDefinition API k8s.cni.cncf.io/v1) is not installed",
            ),
            Problem::CdiNotInstalled { volumes } => write!(
                f,
                "CDI (Containerized Data Importer) is not installed: the DataVolume API \
                 (cdi.kubevirt.io/v1beta1) is not served, and {} need it",
                volumes.join(", ")
            ),
            Problem::SecretNotFound { name } => write!(f, "cloud-init Secret {name:?} not found"),
            Problem::SecretKeyNotFound { name, key } => {
                write!(f, "cloud-init Secret {name:?} has no key {key:?}")
            }
            Problem::Conflict { kind, name } => write!(
                f,
                "{} {name} exists and is not controlled by this Machine",
                kind.as_str()
            ),
            Problem::ReleaseFailed {
                kind,
                name,
                message,
            } => write!(
                f,
                "{} {name} still carries the Machine's owner reference (deleting the Machine \
                 now could delete it): {message}",
                kind.as_str()
            ),
            Problem::DataSourceUnusable {
                field,
                data_source,
                cluster,
                fault,
            } => {
                write!(f, "{field}: DataSource {data_source} on cluster {cluster} ")?;
                match fault {
                    DataSourceFault::Missing => {
                        f.write_str("not found: nothing is cloned until it exists there")
                    }
                    DataSourceFault::NoSource => f.write_str("names no PVC or snapshot"),
                    DataSourceFault::NotReady => {
                        f.write_str("is not Ready: cloned once CDI says it is")
                    }
                    DataSourceFault::CrossNamespace { namespace } => write!(
                        f,
                        "clones from namespace {namespace:?}, and KubevirtConfig {cluster} \
                         does not set allowCrossNamespaceClones: true"
                    ),
                }
            }
            Problem::CloneUnauthorized { name, message } => {
                write!(f, "DataVolume {name}: CDI refused the clone: {message}")
            }
            Problem::CloneSourceNotPinned { volume } => write!(
                f,
                "{volume}: what its DataSource clones was not pinned at admission (annotation \
                 {}); any update of the Machine through the webhook pins it and checks the \
                 author's right to clone it",
                crate::api::names::CLONE_SOURCES_ANNOTATION
            ),
            Problem::WriteFailed {
                kind,
                name,
                message,
            } => write!(f, "{} {name}: {message}", kind.as_str()),
        }
    }
}

#[cfg(test)]
mod tests;
