//! The derived cloud-init Secret's write. Secrets are never watched, so what this process last
//! applied or read is remembered (`store::derived_secrets`). Observe reads the Secret whenever
//! what it remembers may not hold what is wanted, and judges it with the rest; `decide` writes
//! nothing over a remembered one (it holds what is wanted). Here the decided Secret is written
//! over the one observe read, and what was written is remembered.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Resource, ResourceExt};

use super::apply::{self, Prover};
use super::failed;
use crate::reconciler::decide::problem::{Kind, Problem};
use crate::reconciler::observe::{Derived, Observed};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::watches::key_of;
use crate::reconciler::store::derived_secrets::Known;

/// Makes the derived Secret `desired` (decided on `o`'s evidence) what is stored.
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
    // A Secret is decided only over one observe read (see `observe::Derived`).
    let live = match &o.derived_secret {
        Derived::Read(live) => live.as_deref().cloned(),
        Derived::Remembered(_) | Derived::NotLooked => None,
    };
    let applied = apply::ensure_proven(&secrets, desired, live, &cluster.written.secrets, prover)
        .await
        .map_err(|e| failed(Kind::Secret, name, &e))?;
    let memory = &ctx.per_machine.derived_secrets;
    let (key, uid) = (key_of(machine), machine.uid().unwrap_or_default());
    memory.remember(&key, &uid, Known::of(Some(applied.meta())));
    Ok(())
}
