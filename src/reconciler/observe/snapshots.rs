//! A Machine's snapshots and restores, from the caches: whether a MachineRestore holds the
//! Machine (then the reconciler leaves its VM and disks to it), and its MachineSnapshots.

use kube::{Resource, ResourceExt};

use crate::api::snapshots::{SCHEDULED_PROOF_KIND, holds};
use crate::api::{Machine, MachineRestore};
use crate::reconciler::decide::ownership::MachineRef;
use crate::reconciler::decide::status::snapshots::Seen;
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;

/// The restore of `machine` that holds it, if any (the oldest, should two run): its name, and
/// its step with what it waits for (`Adopting: data lost: ...`), shown in `Restoring`. A restore
/// holds only the Machine whose uid it recorded on leaving `Pending`: never a Machine made again
/// under that name (one that recorded none, from before uids were recorded, holds by name).
pub fn holding(ctx: &Context, ns: &str, machine: MachineRef) -> Option<(String, String)> {
    let mut holding = (ctx.stores.restores).state_filter(|r| holds_machine(r, ns, machine));
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

/// Whether `restore` holds `machine` (in `ns`): of its namespace and name, in a holding step,
/// and pinned to its uid (or to none, from before restores recorded it).
fn holds_machine(restore: &MachineRestore, ns: &str, machine: MachineRef) -> bool {
    let status = restore.status.as_ref();
    restore.namespace().as_deref() == Some(ns)
        && restore.spec.machine_name == machine.name
        && holds(status.and_then(|s| s.phase.as_deref()))
        && status
            .and_then(|s| s.machine_uid.as_deref())
            .is_none_or(|pinned| Some(pinned) == machine.uid)
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn machine(uid: &str) -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": "db", "namespace": "ns", "uid": uid},
            "spec": {"template": "small"}
        }))
        .expect("machine")
    }

    fn restore(machine: &str, phase: &str, pinned: Option<&str>) -> MachineRestore {
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineRestore",
            "metadata": {"name": "undo", "namespace": "ns"},
            "spec": {"machineName": machine, "snapshotName": "s"},
            "status": {"phase": phase, "machineUid": pinned}
        }))
        .expect("restore")
    }

    #[test]
    fn a_restore_holds_only_the_machine_it_pinned_while_in_a_holding_step() {
        let db = machine("uid-2");
        // (row, restore, holds)
        let rows = [
            (
                "pinned to it",
                restore("db", "Adopting", Some("uid-2")),
                true,
            ),
            (
                "an earlier Machine's",
                restore("db", "Adopting", Some("uid-1")),
                false,
            ),
            (
                "from before pinning",
                restore("db", "Restoring", None),
                true,
            ),
            ("not yet holding", restore("db", "Pending", None), false),
            ("done", restore("db", "Succeeded", Some("uid-2")), false),
            (
                "another Machine",
                restore("web", "Stopping", Some("uid-2")),
                false,
            ),
        ];
        for (row, r, want) in rows {
            let ns = db.namespace().unwrap_or_default();
            assert_eq!(holds_machine(&r, &ns, MachineRef::of(&db)), want, "{row}");
        }
    }
}
