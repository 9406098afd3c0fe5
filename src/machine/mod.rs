//! The Machine domain core: pure functions of their inputs, shared by the webhooks, the offline
//! `validate` command and the reconciler.

pub mod annotations;
pub mod catalog;
pub mod classes;
pub mod clones;
pub mod field_error;
pub mod machine_types;
pub mod names;
pub mod namespace_selector;
pub mod network_policy;
pub mod placement;
pub mod resolve;
pub mod scheduling;
pub mod sizes;
pub mod sources;
pub mod templates;
pub mod update_rules;
pub mod validation;

pub use catalog::Catalog;
pub use field_error::{FieldError, FieldPath};
pub use resolve::{DEFAULTS_ANNOTATION, Resolved, resolve};

/// Lets the reconciler clean up before a Machine goes. The mutating webhook adds it on CREATE,
/// so a new Machine costs the reconciler no extra write; the reconciler adds it only to a
/// never-reconciled Machine stored without it (created before the webhook was installed, or
/// bypassing it), so one removed later stays removed.
pub use crate::api::names::FINALIZER;
