//! Writes: server-side apply of derived objects (only when [`drift`] says so); the Machine's
//! status is written by `act::status`.

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::names::PROOF_ANNOTATION;
use crate::reconciler::FIELD_MANAGER;
use crate::reconciler::decide::drift;
use crate::reconciler::decide::evidence::{OwnershipKey, Target};
use crate::reconciler::store::last_write::LastWrite;

/// Applies `desired` (stamping it first) unless `live` already matches; returns the object as
/// the API server now has it. `written` remembers the result, and stands in for `live` while the
/// cache has not caught up with our last write.
pub async fn ensure<K>(
    api: &Api<K>,
    mut desired: K,
    live: Option<K>,
    written: &LastWrite<K>,
) -> Result<K, kube::Error>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
{
    drift::stamp(&mut desired);
    let key = format!(
        "{}/{}",
        desired.namespace().unwrap_or_default(),
        desired.name_any()
    );
    let cached_version = live.as_ref().and_then(|l| l.resource_version());
    let live = written.newer_than(&key, cached_version.as_deref()).or(live);
    match live {
        Some(live) if !drift::needs_apply(&desired, Some(&live)) => Ok(live),
        _ => {
            let name = desired.name_any();
            // Force: we are the only writer of these fields; a hand edit is drift to revert.
            let params = PatchParams::apply(FIELD_MANAGER).force();
            let mut applied = api.patch(&name, &params, &Patch::Apply(&desired)).await?;
            // Kept for a few seconds per write; the field sets are never read.
            applied.meta_mut().managed_fields = None;
            written.record(key, applied.resource_version().as_deref(), applied.clone());
            Ok(applied)
        }
    }
}

/// Proves what the reconciler makes for one Machine (see `decide::evidence`).
pub struct Prover<'a> {
    pub key: &'a OwnershipKey,
    pub machine: &'a str,
    pub machine_uid: &'a str,
}

impl Prover<'_> {
    /// Puts the made-for proof on `desired`.
    fn stamp<K: Resource<DynamicType = ()>>(&self, desired: &mut K) {
        let kind = K::kind(&());
        let meta = desired.meta();
        let target = Target {
            kind: &kind,
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref().unwrap_or_default(),
        };
        let proof = self.key.proof(&target, self.machine, self.machine_uid);
        desired
            .meta_mut()
            .annotations
            .get_or_insert_with(Default::default)
            .insert(PROOF_ANNOTATION.to_owned(), proof);
    }
}

/// [`ensure`], with the proof that the object is this Machine's in the same write: making an
/// object costs one write, and an adoption is proven only if its write succeeds.
pub async fn ensure_proven<K>(
    api: &Api<K>,
    mut desired: K,
    live: Option<K>,
    written: &LastWrite<K>,
    prover: &Prover<'_>,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    prover.stamp(&mut desired);
    ensure(api, desired, live, written).await
}
