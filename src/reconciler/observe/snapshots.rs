//! A Machine's snapshots and restores, from the caches: whether a MachineRestore holds the
//! Machine (then the reconciler leaves its VM and disks to it), and its MachineSnapshots.

use kube::{Resource, ResourceExt};

use crate::api::Machine;
use crate::api::snapshots::{SCHEDULED_PROOF_KIND, holds};
use crate::reconciler::decide::status::snapshots::Seen;
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;

/// The restore of Machine `name` in `ns` that holds it, if any (the oldest, should two run): its
/// name, and its step with what it waits for (`Adopting: data lost: ...`), shown in `Restoring`.
pub fn holding(ctx: &Context, ns: &str, name: &str) -> Option<(String, String)> {
    let mut holding = ctx.stores.restores.state_filter(|r| {
        r.namespace().as_deref() == Some(ns)
            && r.spec.machine_name == name
            && holds(r.status.as_ref().and_then(|s| s.phase.as_deref()))
    });
    holding.sort_by_key(|r| r.creation_timestamp());
    let r = holding.first()?;
    let status = r.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
    let step = match status.and_then(|s| s.error.as_deref()) {
        Some(why) => format!("{phase}: {why}"),
        None => phase,
    };
    Some((r.name_any(), step))
}

/// The MachineSnapshots of `machine`, and apart those of an earlier Machine of its name.
pub fn of(ctx: &Context, cluster: &Cluster, machine: &Machine, scheduled: bool) -> Seen {
    let (ns, name, uid) = (machine.namespace(), machine.name_any(), machine.uid());
    let (snapshots, earlier): (Vec<_>, Vec<_>) = ctx
        .stores
        .snapshots
        .state_filter(|s| {
            s.namespace() == ns
                && s.spec.machine_name == name
                && s.meta().deletion_timestamp.is_none()
        })
        .iter()
        .map(|s| s.as_ref().clone())
        .partition(|s| {
            let taken_of = s.status.as_ref().and_then(|st| st.machine_uid.as_ref());
            taken_of.is_none_or(|u| Some(u) == uid.as_ref())
        });
    // The operator's own scheduled snapshots of this very Machine: their proof verifies for its
    // name and uid (the scheduler's rule, `crate::snapshots::scheduler`).
    let scheduled_by_operator = (snapshots.iter())
        .filter(|s| {
            let proven = ctx
                .ownership_key
                .made_for(SCHEDULED_PROOF_KIND, s.meta(), &name);
            proven.is_some() && proven == uid.as_deref()
        })
        .map(ResourceExt::name_any)
        .collect();
    Seen {
        scheduled,
        api: cluster.apis.kubevirt_snapshots,
        snapshots,
        earlier,
        scheduled_by_operator,
    }
}
