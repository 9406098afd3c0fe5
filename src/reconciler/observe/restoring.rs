//! Whether a MachineRestore holds the Machine: then the reconciler leaves its VM and disks to it.

use kube::ResourceExt;

use crate::api::snapshots::holds;
use crate::reconciler::run::context::Context;

/// The restore of Machine `name` in `ns` that holds it, if any (the oldest, should two run).
pub fn holding(ctx: &Context, ns: &str, name: &str) -> Option<(String, String)> {
    let mut holding = ctx.stores.restores.state_filter(|r| {
        r.namespace().as_deref() == Some(ns)
            && r.spec.machine_name == name
            && holds(r.status.as_ref().and_then(|s| s.phase.as_deref()))
    });
    holding.sort_by_key(|r| r.creation_timestamp());
    let r = holding.first()?;
    let phase = r.status.as_ref().and_then(|s| s.phase.clone());
    Some((r.name_any(), phase.unwrap_or_default()))
}
