//! The reconciler: turns each Machine into a KubeVirt VirtualMachine, its PersistentVolumeClaims,
//! Multus attachments and status, on the leader only.
//!
//! Pure core, thin I/O shell: [`desired`] and [`status`] are plain functions of what was observed
//! (unit-tested exhaustively); [`controller`] wires the watches ([`watches`]) to observe ->
//! decide -> act ([`observe`], [`decide`], [`act`]); [`ownership`] and [`problem`] are the
//! shared vocabulary. It runs on the leader only
//! (`crate::leader` starts and stops it).

pub mod act;
pub mod apply;
pub mod caches;
pub mod cdi;
pub mod context;
pub mod controller;
pub mod decide;
pub mod desired;
pub mod drift;
pub mod error;
pub mod events;
pub mod finalizer;
pub mod kubevirt;
pub mod last_write;
pub mod metrics;
pub mod multus;
pub mod observe;
pub mod ownership;
pub mod packed;
pub mod presence;
pub mod problem;
pub mod provisioning;
pub mod readiness;
pub mod scopes;
pub mod spec;
pub mod status;
pub mod volumes;
pub mod watches;

pub use context::{Clients, Settings};
pub use error::Error;
pub use problem::Problem;
pub use scopes::run;

// SPEC's names live in `crate::api::names`; the children use them through here.
use crate::api::names::{
    APPLIED_HASH_ANNOTATION, CLOUD_INIT_VOLUME, FIELD_MANAGER, FINALIZER, MACHINE_LABEL,
    MANAGED_BY, MANAGED_BY_LABEL, RETAIN_DISKS_ANNOTATION,
};

/// The Secret key KubeVirt reads cloud-init user data from.
pub const USERDATA_KEY: &str = "userdata";
pub const RUN_STRATEGY_ALWAYS: &str = "Always";
pub const RUN_STRATEGY_HALTED: &str = "Halted";
