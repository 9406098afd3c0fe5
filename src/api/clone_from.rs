//! `spec.cloneFrom` of a Machine: a new Machine made from an existing one of its namespace.
//! The mutating webhook fills the new Machine from the source once, at creation
//! (`crate::clones`); the field is immutable after.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Kubernetes object name's bound (DNS-1123 subdomain).
pub const MAX_SOURCE_NAME: usize = 253;

/// What a new Machine is cloned from. Exactly one is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CloneFrom {
    /// A Machine in this namespace: every disk of the new Machine is a CDI clone of that
    /// Machine's claim of the same name (stop it first: CDI waits while a claim is in use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = MAX_SOURCE_NAME))]
    pub machine: Option<String>,
    /// A MachineSnapshot in this namespace (Succeeded, ready to use, of a Machine that still
    /// exists): every disk of its Machine becomes a CDI clone of the disk's VolumeSnapshot in it;
    /// the rest is taken from that Machine as for `machine`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = MAX_SOURCE_NAME))]
    pub snapshot: Option<String>,
}

/// The source `spec.cloneFrom` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Named<'a> {
    Machine(&'a str),
    Snapshot(&'a str),
}

impl CloneFrom {
    /// The one source named, when exactly one is.
    pub fn named(&self) -> Option<Named<'_>> {
        match (&self.machine, &self.snapshot) {
            (Some(m), None) => Some(Named::Machine(m)),
            (None, Some(s)) => Some(Named::Snapshot(s)),
            _ => None,
        }
    }
}
