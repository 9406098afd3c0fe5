//! The reconciler: turns each Machine into a KubeVirt VirtualMachine, its PersistentVolumeClaims,
//! Multus attachments and status, on the leader only.
//!
//! Pure core, thin I/O shell: [`decide::desired`] and [`decide::status`] are plain functions of
//! what was observed (unit-tested exhaustively); [`run::controller`] wires the watches
//! ([`run::watches`]) to observe -> decide -> act ([`observe`], [`decide`], [`act`]);
//! [`decide::ownership`] and [`decide::problem`] are the shared vocabulary. It runs on the leader
//! only (`crate::leader` starts and stops it).
//!
//! The folders, by stage and by foreign API:
//! - [`mod@run`]: the entry point [`run()`], the controllers, their watches, context, readiness
//!   and metrics (I/O).
//! - [`store`]: the watch caches and what they keep: packed entries, presence, our last writes.
//! - [`observe`]: gathers what one Machine's reconcile needs from the caches and by-name GETs (I/O).
//! - [`decide`]: pure, no API calls: desired objects, ownership, drift, provisioning, status,
//!   problems, volumes, the resolved spec, and the decision itself.
//! - [`act`]: carries out a decision: applies, deletes, the finalizer, Events (I/O).
//! - [`apis`]: the typed slices of foreign APIs (KubeVirt, CDI, Multus); types only.

pub mod act;
pub mod apis;
pub mod decide;
pub mod error;
pub mod observe;
pub mod run;
pub mod store;

pub use decide::problem::Problem;
pub use error::Error;
pub use run::context::{Clients, Settings};
pub use run::scopes::run;

// SPEC's names live in `crate::api::names`; the children use them through here.
use crate::api::names::{
    APPLIED_HASH_ANNOTATION, CLOUD_INIT_VOLUME, FIELD_MANAGER, FINALIZER, MACHINE_LABEL,
    MANAGED_BY, MANAGED_BY_LABEL, RETAIN_DISKS_ANNOTATION,
};

/// The Secret keys KubeVirt reads cloud-init user and network data from.
pub const USERDATA_KEY: &str = "userdata";
pub const NETWORKDATA_KEY: &str = "networkdata";
