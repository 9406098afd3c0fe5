//! The reconciler: turns each Machine into a KubeVirt VirtualMachine, its PersistentVolumeClaims,
//! Multus attachments and status, on the leader only.
//!
//! Pure core, thin I/O shell: [`desired`] and [`status`] are plain functions of what was observed
//! (unit-tested exhaustively); [`controller`] watches and writes; [`apply`], [`finalizer`],
//! [`events`] and [`readiness`] are its small I/O helpers. It runs on the leader only
//! (`crate::leader` starts and stops it).

pub mod apply;
pub mod cdi;
pub mod controller;
pub mod desired;
pub mod drift;
pub mod error;
pub mod events;
pub mod finalizer;
pub mod kubevirt;
pub mod last_write;
pub mod metrics;
pub mod multus;
pub mod provisioning;
pub mod readiness;
pub mod status;

pub use controller::{Settings, run};
pub use error::Error;

/// Field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "kubevirt-operator";
pub const MANAGED_BY_LABEL: &str = "vitistack.io/managed-by";
pub const MANAGED_BY: &str = "kubevirt-operator";
pub const MACHINE_LABEL: &str = "vitistack.io/machine";
/// On NetworkAttachmentDefinitions, which serve every Machine on a NetworkConfiguration.
pub const NETWORK_LABEL: &str = "vitistack.io/network-configuration";
pub use crate::machine::FINALIZER;
/// `"true"` keeps a deleted Machine's PVCs (released from its ownership).
pub const RETAIN_DISKS_ANNOTATION: &str = "vitistack.io/retain-disks";
/// Hash of what was last applied to an object (see [`drift`]).
pub const APPLIED_HASH_ANNOTATION: &str = "vitistack.io/applied-hash";
pub const CLOUD_INIT_VOLUME: &str = "cloudinitdisk";
/// The Secret key KubeVirt reads cloud-init user data from.
pub const USERDATA_KEY: &str = "userdata";
pub const RUN_STRATEGY_ALWAYS: &str = "Always";
pub const RUN_STRATEGY_HALTED: &str = "Halted";
