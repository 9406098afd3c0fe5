//! The cluster a Machine's VM, disks and KubeVirt snapshot objects live on, as the snapshot
//! controllers reach it: the shell of [`super::site`] (the KubevirtConfig's health from the
//! registry the Machine reconciler reads, the Machine's namespace labels when a
//! `namespaceSelector` decides), and the [`Workload`] handle the controllers read and write
//! through. Machines, MachineSnapshots and MachineRestores stay on the operator's cluster.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::site::{self, Seen, Site};
use crate::api::Machine;
use crate::api::names::PROOF_ANNOTATION;
use crate::machine::placement::{self, Placement};
use crate::reconciler::decide::desired::meta::controller_ref;
use crate::reconciler::decide::evidence::{OwnershipKey, Target};
use crate::reconciler::decide::ownership::controlled_by;
use crate::reconciler::decide::placement::{self as decide, Placed};

/// Where a snapshot's or restore's KubeVirt objects are read and written.
pub struct Workload {
    pub client: Client,
    /// The key objects there are judged with (no second-edition history on a remote cluster).
    pub key: OwnershipKey,
    /// The KubevirtConfig and cluster identity; `None` for the operator's own cluster.
    pub remote: Option<(String, String)>,
    /// KubeVirt's snapshot API is served there.
    pub snapshot_api: bool,
}

impl Workload {
    /// The workload cluster of `site`, if it can be worked on.
    pub fn of(ctx: &Context, site: &Site) -> Option<Workload> {
        match site {
            Site::Local => Some(Workload {
                client: ctx.client.clone(),
                key: ctx.key.clone(),
                remote: None,
                snapshot_api: ctx.kubevirt,
            }),
            Site::Remote(c) => Some(Workload {
                client: c.client.clone(),
                key: ctx.key.without_history(),
                remote: Some((c.name.clone(), c.identity.clone())),
                snapshot_api: c.apis.kubevirt_snapshots,
            }),
            Site::Wait(_) => None,
        }
    }

    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// What marks an object made there for `owner` (kind `kind`): on the operator's cluster a
    /// controller reference (the garbage collector deletes it with its owner); on a remote one,
    /// where owner references cannot reach, a proof under the key bound to the owner's name and
    /// uid ([`owner_proof`]), and the owner deletes it itself.
    pub fn owned_by<K: Resource<DynamicType = ()>>(
        &self,
        owner: &K,
        kind: &str,
    ) -> (Option<Vec<OwnerReference>>, Option<(String, String)>) {
        match self.remote {
            None => (controller_ref(owner).map(|r| vec![r]), None),
            Some(_) => (None, Some(owner_proof(&self.key, owner, kind))),
        }
    }

    /// Whether `meta`'s object is one made there for `owner` (of `kind`), by [`Self::owned_by`].
    pub fn made_for<K: Resource<DynamicType = ()>>(
        &self,
        meta: &ObjectMeta,
        owner: &K,
        kind: &str,
    ) -> bool {
        match self.remote {
            None => controlled_by(meta, owner.meta().uid.as_deref()),
            Some(_) => proven_owner(&self.key, meta, owner, kind),
        }
    }
}

/// The proof's target: the owner `kind`'s `name/uid` (a name holds no `/`).
fn owner_target<'a>(kind: &'a str, ns: &'a str, name_uid: &'a str) -> Target<'a> {
    Target {
        kind,
        namespace: ns,
        name: name_uid,
    }
}

fn name_uid<K: Resource<DynamicType = ()>>(owner: &K) -> (String, String) {
    let ns = owner.namespace().unwrap_or_default();
    (
        ns,
        format!("{}/{}", owner.name_any(), owner.uid().unwrap_or_default()),
    )
}

/// The [`PROOF_ANNOTATION`] saying an object was made for `owner` (a MachineRestore, of `kind`):
/// a made-for proof whose target is the owner's `name/uid` and whose "Machine" is the owner
/// itself (uid `-`: the target already binds its uid), so it verifies for this very owner only.
pub fn owner_proof<K: Resource<DynamicType = ()>>(
    key: &OwnershipKey,
    owner: &K,
    kind: &str,
) -> (String, String) {
    let (ns, name_uid) = name_uid(owner);
    let proof = key.proof(&owner_target(kind, &ns, &name_uid), &owner.name_any(), "-");
    (PROOF_ANNOTATION.to_owned(), proof)
}

/// Whether `meta` carries [`owner_proof`] for `owner`.
fn proven_owner<K: Resource<DynamicType = ()>>(
    key: &OwnershipKey,
    meta: &ObjectMeta,
    owner: &K,
    kind: &str,
) -> bool {
    let (ns, name_uid) = name_uid(owner);
    let value = (meta.annotations.as_ref()).and_then(|a| a.get(PROOF_ANNOTATION));
    owner.uid().is_some()
        && value.is_some_and(|v| {
            key.proven_for(&owner_target(kind, &ns, &name_uid), &owner.name_any(), v)
                .is_some()
        })
}

/// Where work for `machine` runs now, `pinned` to a cluster identity if its work was made
/// there. A remote Machine's KubevirtConfig is asked as the Machine reconciler asks it: its
/// health, then its `namespaceSelector` (the webhook may have been bypassed), then the
/// identity the Machine was made on.
pub async fn site_of(
    ctx: &Context,
    machine: &Machine,
    pinned: Option<&str>,
) -> Result<Site, Error> {
    let default = ctx.settings.default_kubevirt_config.as_deref();
    let placement = placement::of(machine, default);
    let Placement::Remote(name) = &placement else {
        return Ok(Site::Local);
    };
    let registry = &ctx.settings.clusters;
    let health = registry.get(name);
    let namespace = machine
        .namespace()
        .ok_or_else(|| Error::NoNamespace(machine.name_any()))?;
    let selector =
        (health.as_ref().and_then(|h| h.ready())).and_then(|c| c.namespace_selector.clone());
    // A deleting Machine's cleanup is not refused by the selector (as the reconciler's).
    let placed = Placed {
        namespace: &namespace,
        deleting: machine.meta().deletion_timestamp.is_some(),
        selector: selector.as_ref(),
    };
    let forbidden = match placed.asks_labels() {
        false => None,
        true => {
            let api: Api<Namespace> = Api::all(ctx.client.clone());
            let labels = (api.get_metadata_opt(&namespace).await?)
                .and_then(|n| n.metadata.labels)
                .unwrap_or_default();
            decide::forbidden(&placed, &labels)
        }
    };
    let made_on = (machine.status.as_ref()).and_then(|s| s.cluster_identity.as_deref());
    Ok(site::site(
        &placement,
        Seen {
            exists: registry.exists(name),
            health,
            forbidden,
            made_on,
            pinned,
        },
    ))
}

/// Where work made on remote cluster `cluster` (identity `pinned`) is, whatever became of its
/// Machine: for deleting it.
pub fn site_at(ctx: &Context, cluster: &str, pinned: Option<&str>) -> Site {
    let registry = &ctx.settings.clusters;
    site::site(
        &Placement::Remote(cluster.to_owned()),
        Seen {
            exists: registry.exists(cluster),
            health: registry.get(cluster),
            pinned,
            ..Seen::default()
        },
    )
}
