//! The derived cloud-init Secret (`<machine>-cloudinit`) as observe knows it: remembered by
//! this process (`store::derived_secrets`), or read, since Secrets are never watched.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;

use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::decide::ownership::{self, MachineRef};
use crate::reconciler::run::context::Context;
use crate::reconciler::store::derived_secrets::Known;

/// The derived cloud-init Secret (`<machine>-cloudinit`) as this reconcile knows it.
#[derive(Clone, Debug, Default)]
pub enum Derived {
    /// Not looked for: no Secret source, and the VM names no derived Secret.
    #[default]
    NotLooked,
    /// As this process last applied or read it (no request made; see `store::derived_secrets`),
    /// holding what `decide` would write (so it writes nothing), if it may write one.
    Remembered(Known),
    /// Read now, whole: what is remembered may not hold what is wanted (or is not fresh). Act
    /// writes over it; its drift check compares its data.
    Read(Option<Box<Secret>>),
}

impl Derived {
    /// Its metadata, the evidence its ownership is judged on; `None` when absent.
    pub fn meta(&self) -> Option<&ObjectMeta> {
        match self {
            Derived::NotLooked => None,
            Derived::Remembered(k) => k.meta(),
            Derived::Read(s) => s.as_deref().map(|s| &s.metadata),
        }
    }
}

/// The derived Secret as remembered while that is fresh, else read (and remembered), for the
/// Machine `me` with `key`. Read also when a Secret is wanted (`want`) that what is remembered
/// does not hold, unless what is remembered is judged not ours to write (`okey`): then nothing
/// is written, so nothing is read.
pub(super) async fn known(
    ctx: &Context,
    (key, me, okey): (&str, MachineRef<'_>, &OwnershipKey),
    secrets: &Api<Secret>,
    name: &str,
    want: Option<&Secret>,
) -> Result<Derived, kube::Error> {
    let uid = me.uid.unwrap_or_default();
    let memory = &ctx.per_machine.derived_secrets;
    if let Some(known) = memory.recall(key, uid) {
        let writable = || ownership::of_meta(known.meta(), "Secret", me, okey).writable(false);
        if known.stands_for(want) || !writable() {
            return Ok(Derived::Remembered(known));
        }
    }
    let live = secrets.get_opt(name).await?;
    memory.remember(key, uid, Known::of(live.as_ref().map(|s| &s.metadata)));
    Ok(Derived::Read(live.map(Box::new)))
}
