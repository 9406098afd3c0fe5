//! Who may place a Machine on a remote cluster, and what else its author is asked (pure,
//! table-tested in `placement/tests.rs`).
//!
//! - `use` on the KubevirtConfig, by name (cluster-scoped, so an admin grants it per name with
//!   a ClusterRole): asked of the author on CREATE, as the placement never changes after.
//! - the KubevirtConfig's `spec.namespaceSelector`, when set, must select the Machine's
//!   namespace: checked by the webhook and again by the reconciler
//!   ([`crate::machine::namespace_selector`]).
//! - [`remote_needs`]: what a local Machine's author is asked, on the management cluster's RBAC
//!   of the Machine's namespace (the remote namespace mirrors it), with two differences: every
//!   claim a new disk would adopt is asked about as if it existed (it would live on the remote
//!   cluster, which the webhook cannot see), and a clone from another namespace of the remote
//!   cluster is the KubevirtConfig's `allowCrossNamespaceClones` to allow, not asked here.
//!   A `dataSource` is not resolved here (the one that counts is on the remote cluster, resolved
//!   there by the reconciler): one of the Machine's namespace needs CDI's clone right in that
//!   namespace for any PVC (`create datavolumes/source`, no name), since what it points to
//!   there is not known yet; one elsewhere is the KubevirtConfig's to allow, like a PVC's.

use std::collections::{BTreeMap, BTreeSet};

use super::Permission;
use super::data_sources::{Ref, Target};
use super::needs::{Change, claim_candidates, data_source_refs, machine_needs};
use crate::api::names::KUBEVIRT_CONFIG_ANNOTATION;

pub const KUBEVIRT_CONFIG_GROUP: &str = "vitistack.io";
pub const KUBEVIRT_CONFIGS: &str = "kubevirtconfigs";
/// The verb an author needs on a KubevirtConfig to place Machines on its cluster.
pub const USE_VERB: &str = "use";

/// `use` on KubevirtConfig `config`: what placing a Machine on it needs of its author.
pub fn placement_need(config: &str) -> Permission {
    Permission {
        field: format!("metadata.annotations[{KUBEVIRT_CONFIG_ANNOTATION}]"),
        verb: USE_VERB.to_owned(),
        group: KUBEVIRT_CONFIG_GROUP.to_owned(),
        resource: KUBEVIRT_CONFIGS.to_owned(),
        subresource: String::new(),
        // Cluster-scoped.
        namespace: String::new(),
        name: config.to_owned(),
        adopted: false,
    }
}

/// What a remote Machine's author is asked, given the change with no claims looked up: see the
/// module's documentation.
pub fn remote_needs(change: &Change) -> Vec<Permission> {
    let assumed: BTreeSet<String> = claim_candidates(change)
        .into_iter()
        .map(|c| c.claim)
        .collect();
    // A PVC without a name: CDI's right asked for every PVC of the namespace.
    let anywhere: BTreeMap<Ref, Target> = data_source_refs(change)
        .into_iter()
        .filter(|(ns, _)| ns == change.namespace)
        .map(|r| {
            let namespace = change.namespace.to_owned();
            let target = Target::Pvc {
                namespace,
                name: String::new(),
            };
            (r, target)
        })
        .collect();
    let change = Change {
        existing_claims: &assumed,
        data_sources: &anywhere,
        ..*change
    };
    machine_needs(&change)
        .into_iter()
        .filter(|p| p.subresource != "source" || p.namespace == change.namespace)
        .collect()
}

#[cfg(test)]
mod tests;
