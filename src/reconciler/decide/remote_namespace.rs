//! Whether a Machine's namespace on a remote cluster may be used (pure): only one this operator
//! made, proven like every other object it makes.
//!
//! A namespace is shared by every Machine of the management namespace of the same name on that
//! cluster, so its proof is made for neither Machine: it is a made-for proof (see
//! [`OwnershipKey::proof`]) of kind `Namespace` whose "Machine" is the management namespace and
//! whose "uid" is the remote cluster's identity (its `kube-system` uid). It verifies only for
//! that name, that management namespace, on that cluster, under our key.
//!
//! Namespaces made before this rule carry only our labels. One of them is adopted (its proof
//! written once) if it holds an object proven for one of its Machines: only the operator can
//! have put that there, so it wrote into the namespace before, and nobody but a remote admin can
//! have labelled it. Under a key that replaced a lost one (`--new-ownership-key`), a labelled
//! namespace older than that key is adopted too, as `decide::reprove` re-proves the objects in
//! it. A labelled namespace holding nothing of ours is a conflict, like any other namespace
//! without the proof. A namespace being deleted is waited for, whoever made it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::evidence::{OwnershipKey, Target};
use crate::api::names::{MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, PROOF_ANNOTATION};

/// `ClusterReady` reason: the Machine's namespace on its cluster was not made by the operator.
pub const NAMESPACE_CONFLICT: &str = "NamespaceConflict";
/// `ClusterReady` reason: the Machine's namespace on its cluster is being deleted.
pub const NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

const KIND: &str = "Namespace";

/// The namespace a Machine needs on a remote cluster.
#[derive(Clone, Copy, Debug)]
pub struct Wanted<'a> {
    /// Its name there.
    pub name: &'a str,
    /// The Machine's namespace on the management cluster.
    pub management: &'a str,
    /// The KubevirtConfig the cluster is reached through (for messages).
    pub cluster: &'a str,
    /// The cluster's identity (its `kube-system` namespace's uid).
    pub identity: &'a str,
}

/// What to do about it.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Missing: make it.
    Make(Box<Namespace>),
    /// Ours: use it.
    Use,
    /// Ours by the earlier rule: write this proof onto it once, then use it.
    Adopt(String),
    /// Not usable now, nor ours to touch: (`ClusterReady` reason, message).
    Unready(&'static str, String),
}

fn target<'a>(w: &Wanted<'a>) -> Target<'a> {
    Target {
        kind: KIND,
        namespace: "",
        name: w.name,
    }
}

/// The proof that `w` was made by this operator.
pub fn proof(w: &Wanted, key: &OwnershipKey) -> String {
    key.proof(&target(w), w.management, w.identity)
}

/// Whether `meta` (a namespace named as `w`) carries our proof for `w`.
pub fn proven(w: &Wanted, meta: &ObjectMeta, key: &OwnershipKey) -> bool {
    let value = (meta.annotations.as_ref()).and_then(|a| a.get(PROOF_ANNOTATION));
    value.and_then(|v| key.proven_for(&target(w), w.management, v)) == Some(w.identity)
}

/// Whether any of `objects` (kind, metadata) found in the namespace was proven by us for the
/// Machine its `vitistack.io/machine` label names.
pub fn holds_ours<'m>(
    objects: impl IntoIterator<Item = (&'m str, &'m ObjectMeta)>,
    key: &OwnershipKey,
) -> bool {
    objects.into_iter().any(|(kind, meta)| {
        let machine = (meta.labels.as_ref()).and_then(|l| l.get(MACHINE_LABEL));
        machine.is_some_and(|m| key.made_for(kind, meta, m).is_some())
    })
}

/// What to do about `found` (the namespace named as `w` on its cluster, if any), given whether
/// it [`holds_ours`].
pub fn judge(
    w: &Wanted,
    found: Option<&ObjectMeta>,
    holds_ours: bool,
    key: &OwnershipKey,
) -> Verdict {
    let Some(meta) = found else {
        return Verdict::Make(Box::new(made(w, key)));
    };
    let (name, cluster) = (w.name, w.cluster);
    if meta.deletion_timestamp.is_some() {
        let message = format!(
            "namespace {name} on cluster {cluster} is being deleted: waiting for it to go, to make it again"
        );
        return Verdict::Unready(NAMESPACE_TERMINATING, message);
    }
    if proven(w, meta, key) {
        return Verdict::Use;
    }
    let labelled = (meta.labels.as_ref()).and_then(|l| l.get(MANAGED_BY_LABEL));
    let earlier = holds_ours || key.predates_replacement(meta);
    if labelled.map(String::as_str) == Some(MANAGED_BY) && earlier {
        return Verdict::Adopt(proof(w, key));
    }
    let message = format!(
        "namespace {name} already exists on cluster {cluster} and was not made by kubevirt-operator (no valid {PROOF_ANNOTATION} proof): nothing is written into it; delete it there to let the operator make it"
    );
    Verdict::Unready(NAMESPACE_CONFLICT, message)
}

/// The namespace to make: labelled as ours, with its proof.
fn made(w: &Wanted, key: &OwnershipKey) -> Namespace {
    let labels = [(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())];
    let annotations = [(PROOF_ANNOTATION.to_owned(), proof(w, key))];
    Namespace {
        metadata: ObjectMeta {
            name: Some(w.name.to_owned()),
            labels: Some(BTreeMap::from(labels)),
            annotations: Some(BTreeMap::from(annotations)),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

#[cfg(test)]
mod tests;
