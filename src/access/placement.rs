//! Who may place a Machine on a remote cluster, and what else its author is asked (pure,
//! table-tested in `placement/tests.rs`).
//!
//! - `use` on the KubevirtConfig, by name (cluster-scoped, so an admin grants it per name with
//!   a ClusterRole): asked of the author on CREATE, as the placement never changes after.
//! - the KubevirtConfig's `spec.namespaceSelector`, when set, must select the Machine's
//!   namespace: checked by the webhook and again by the reconciler ([`namespace_selected`]).
//! - [`remote_needs`]: what a local Machine's author is asked, on the management cluster's RBAC
//!   of the Machine's namespace (the remote namespace mirrors it), with two differences: every
//!   claim a new disk would adopt is asked about as if it existed (it would live on the remote
//!   cluster, which the webhook cannot see), and a clone from another namespace of the remote
//!   cluster is the KubevirtConfig's `allowCrossNamespaceClones` to allow, not asked here.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::needs::{Change, claim_candidates, machine_needs};
use super::Permission;
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
    let change = Change {
        existing_claims: &assumed,
        ..*change
    };
    machine_needs(&change)
        .into_iter()
        .filter(|p| p.subresource != "source" || p.namespace == change.namespace)
        .collect()
}

/// Whether `selector` selects a namespace labelled `labels`: no selector selects every
/// namespace, an empty one too (Kubernetes' meaning); an operator it does not know selects
/// none (fail closed).
pub fn namespace_selected(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let labelled = (selector.match_labels.iter().flatten())
        .all(|(k, v)| labels.get(k) == Some(v));
    labelled
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => !value.is_some_and(|v| values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests;
