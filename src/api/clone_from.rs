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
}

impl CloneFrom {
    /// The source Machine's name, when one is set.
    pub fn machine(&self) -> Option<&str> {
        self.machine.as_deref()
    }
}
