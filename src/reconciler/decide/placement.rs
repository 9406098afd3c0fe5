//! Whether the reconciler may work on a Machine on its remote cluster (pure, table-tested in
//! `placement/tests.rs`). The validating webhook authorizes a placement at CREATE; a Machine
//! can still be stored past it (written while the webhook was not installed or not called, or
//! before a KubevirtConfig set its `namespaceSelector`), so the reconciler checks again what it
//! can know:
//!
//! - the KubevirtConfig's `namespaceSelector` against the labels of the Machine's namespace (on
//!   the management cluster): not selected, nothing is made, changed or deleted there for the
//!   Machine (`ClusterReady=False`, reason [`PLACEMENT_FORBIDDEN`]); what it has there already
//!   stays as it is (running VMs are not stopped) until the namespace is selected again or the
//!   Machine is deleted.
//! - not `use` on the KubevirtConfig: that is a right of the Machine's author, who is known only
//!   to the webhook (a stored Machine does not record who wrote it; `managedFields` name field
//!   managers, not users). Keeping `use` enforced means keeping the validating webhook in force
//!   (`failurePolicy: Fail`, as installed).
//!
//! A deleting Machine is never held here: removing what it made is the cleanup's, under the
//! ownership proof, whoever placed it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::machine::namespace_selector::selects;

/// The `ClusterReady` reason of a Machine whose namespace its KubevirtConfig does not select.
pub const PLACEMENT_FORBIDDEN: &str = "PlacementForbidden";

/// What the reconciler knows of a Machine placed on a remote cluster.
#[derive(Clone, Copy, Debug)]
pub struct Placed<'a> {
    pub namespace: &'a str,
    pub deleting: bool,
    /// The KubevirtConfig's `namespaceSelector`, as its ready connection was made with.
    pub selector: Option<&'a LabelSelector>,
}

impl Placed<'_> {
    /// Whether the namespace's labels are needed to decide (a read the shell skips otherwise).
    pub fn asks_labels(&self) -> bool {
        !self.deleting && self.selector.is_some()
    }
}

/// Why the reconciler must not work on the Machine on its cluster (the `ClusterReady` message,
/// after `KubevirtConfig <name>: `), given its namespace's `labels` (empty when the namespace
/// has none or is gone); `None` when it may.
pub fn forbidden(placed: &Placed, labels: &BTreeMap<String, String>) -> Option<String> {
    if !placed.asks_labels() || selects(placed.selector, labels) {
        return None;
    }
    Some(format!(
        "its namespaceSelector does not select namespace {:?}: nothing is made or changed there \
         for this Machine (an admin labels the namespace or changes the selector; or delete the \
         Machine)",
        placed.namespace
    ))
}

#[cfg(test)]
mod tests;
