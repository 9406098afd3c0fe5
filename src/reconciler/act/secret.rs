//! The derived cloud-init Secret's write. Secrets are never watched, so what this process last
//! applied or read is remembered (`store::derived_secrets`): while the remembered Secret holds
//! what is wanted, nothing is read or written; when it does not (the user's data changed), it
//! is read first and written only if still absent or ours.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Resource, ResourceExt};

use super::apply::{self, Prover};
use super::failed;
use crate::reconciler::decide::disks::conflict;
use crate::reconciler::decide::drift;
use crate::reconciler::decide::ownership::{self, MachineRef};
use crate::reconciler::decide::problem::{Kind, Problem};
use crate::reconciler::observe::{Derived, Observed};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::watches::key_of;
use crate::reconciler::store::derived_secrets::{Known, holds};

/// Makes the derived Secret `desired` (decided writable on `o`'s evidence) what is stored.
pub async fn ensure(
    ctx: &Context,
    cluster: &Cluster,
    o: &Observed,
    desired: Secret,
    prover: &Prover<'_>,
) -> Result<(), Problem> {
    let machine = &o.machine;
    let name = desired.name_any();
    let secrets: Api<Secret> = Api::namespaced(
        cluster.client.clone(),
        &machine.namespace().unwrap_or_default(),
    );
    let (key, uid) = (key_of(machine), machine.uid().unwrap_or_default());
    let memory = &ctx.per_machine.derived_secrets;
    let live = match &o.derived_secret {
        Derived::Read(live) => live.as_deref().cloned(),
        Derived::Remembered(Known::Present(meta)) if holds(meta, &drift::hash_of(&desired)) => {
            return Ok(());
        }
        // What is wanted changed since (or nothing is remembered): read it, and write only
        // over what is still absent or ours.
        _ => {
            let live = (secrets.get_opt(&name).await)
                .map_err(|e| failed(Kind::Secret, name.clone(), &e))?;
            memory.remember(&key, &uid, Known::of(live.as_ref().map(Resource::meta)));
            let verdict = ownership::of(live.as_ref(), MachineRef::of(machine), &cluster.key);
            if !verdict.writable(false) {
                return Err(conflict(Kind::Secret, name));
            }
            live
        }
    };
    let applied = apply::ensure_proven(&secrets, desired, live, &cluster.written.secrets, prover)
        .await
        .map_err(|e| failed(Kind::Secret, name, &e))?;
    memory.remember(&key, &uid, Known::of(Some(applied.meta())));
    Ok(())
}
