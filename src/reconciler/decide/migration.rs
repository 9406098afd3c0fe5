//! Live migration as the Machine shows it (pure): `status.migration` from the VMI's
//! `migrationState`, KubeVirt's `LiveMigratable` condition, and the Events a migration's
//! progress earns (started, succeeded, failed), each once, by comparing with the last status.

use kube::runtime::events::EventType;

use crate::api::placement::{MigrationStatus, migration_phase};
use crate::reconciler::apis::kubevirt::{KubeVirtCondition, VirtualMachineInstanceStatus};

/// The condition type KubeVirt sets on a VMI, mirrored on the Machine.
pub const LIVE_MIGRATABLE: &str = "LiveMigratable";

/// Event reasons, one word each, as in the Machine's other Events.
pub mod reason {
    pub const MIGRATION_STARTED: &str = "MigrationStarted";
    pub const MIGRATION_SUCCEEDED: &str = "MigrationSucceeded";
    pub const MIGRATION_FAILED: &str = "MigrationFailed";
}

/// The VMI's current or last migration; none before the first.
pub fn status(vmi: &VirtualMachineInstanceStatus) -> Option<MigrationStatus> {
    let m = vmi.migration_state.as_ref()?;
    let phase = if m.failed {
        migration_phase::FAILED
    } else if m.completed {
        migration_phase::SUCCEEDED
    } else {
        migration_phase::RUNNING
    };
    Some(MigrationStatus {
        phase: Some(phase.to_owned()),
        source_node: m.source_node.clone(),
        target_node: m.target_node.clone(),
        started_at: m.start_timestamp.clone(),
        ended_at: m.end_timestamp.clone(),
    })
}

/// KubeVirt's `LiveMigratable` condition on the VMI, when it reports one.
pub fn live_migratable(vmi: &VirtualMachineInstanceStatus) -> Option<&KubeVirtCondition> {
    vmi.conditions.iter().find(|c| c.type_ == LIVE_MIGRATABLE)
}

/// The Events `new` earns over `old`: a migration seen for the first time (or a new one, told
/// apart by its start) started; one that reached an end succeeded or failed. A migration first
/// seen already ended earns only its end.
pub fn events(
    old: Option<&MigrationStatus>,
    new: Option<&MigrationStatus>,
) -> Vec<(EventType, &'static str, String)> {
    let Some(new) = new else { return Vec::new() };
    let same = old.filter(|o| o.started_at == new.started_at && o.source_node == new.source_node);
    let node = |n: &Option<String>| n.clone().unwrap_or_else(|| "?".to_owned());
    let (from, to) = (node(&new.source_node), node(&new.target_node));
    let mut out = Vec::new();
    if same.is_none() && new.phase.as_deref() == Some(migration_phase::RUNNING) {
        out.push((
            EventType::Normal,
            reason::MIGRATION_STARTED,
            format!("live migration from {from} to {to} started"),
        ));
    }
    if same.and_then(|o| o.phase.as_deref()) != new.phase.as_deref() {
        match new.phase.as_deref() {
            Some(migration_phase::SUCCEEDED) => out.push((
                EventType::Normal,
                reason::MIGRATION_SUCCEEDED,
                format!("live migration from {from} to {to} succeeded"),
            )),
            Some(migration_phase::FAILED) => out.push((
                EventType::Warning,
                reason::MIGRATION_FAILED,
                format!("live migration from {from} to {to} failed"),
            )),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
