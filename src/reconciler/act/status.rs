//! The Machine's status write: a status already decided (in `run::status`, by the pure rules
//! of `decide::status` and `decide::status_write`) written (a merge patch of every field,
//! [`write_status`]), what the served CRD pruned learnt, and the change announced by Events,
//! all through one [`write`].

use std::time::Instant;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value};

use crate::api::{Machine, MachineStatus};

use super::events;
use crate::reconciler::FIELD_MANAGER;
use crate::reconciler::decide::notices::{Notice, notices};
use crate::reconciler::decide::status_write;
use crate::reconciler::error::Error;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::watches::key_of;

/// The one status write: `new` (it differs from `old`) written at `now`, the fields the served
/// CRD pruned learnt, what was kept remembered, and the change announced by Events (`adjust`
/// amends them). Returns the status as kept.
pub async fn write(
    ctx: &Context,
    machine: &Machine,
    api: &Api<Machine>,
    old: Option<&MachineStatus>,
    new: MachineStatus,
    now: Instant,
    adjust: impl FnOnce(&mut Vec<Notice>, &MachineStatus),
) -> Result<MachineStatus, Error> {
    let key = key_of(machine);
    let served = &ctx.settings.served_status;
    let stored = write_status(api, &machine.name_any(), &new).await?;
    ctx.per_machine.status_written(&key, now);
    let version = stored.resource_version();
    let sent = serde_json::to_value(&new).unwrap_or_default();
    let kept = serde_json::to_value(&stored.status).unwrap_or_default();
    let newly_pruned = served.learn(status_write::pruned(&sent, &kept));
    if !newly_pruned.is_empty() {
        // Once per field and process: later writes leave these fields out.
        tracing::warn!(
            fields = ?newly_pruned,
            "{}",
            status_write::upgrade_warning(&newly_pruned)
        );
    }
    let new = status_write::without(&new, &served.pruned());
    ctx.statuses.record(key, version.as_deref(), new.clone());
    tracing::info!(
        new_phase = new.phase.as_deref().unwrap_or_default(),
        resource_version = version.as_deref().unwrap_or_default(),
        "status updated"
    );
    let mut notices = notices(old, &new);
    adjust(&mut notices, &new);
    let to = (&ctx.events, ctx.settings.metrics.as_ref());
    events::announce_status(to, machine, &new, notices);
    Ok(new)
}

/// Every field of the Machine status, so a merge patch can clear the ones now unset (and what
/// the served CRD's status schema is checked for at leader start).
pub const STATUS_FIELDS: &[&str] = &[
    "phase",
    "conditions",
    "vmName",
    "vmiName",
    "ipAddresses",
    "nodeName",
    "lastUpdated",
    "observedGeneration",
    "disks",
    "vmStatus",
    "migration",
    "interfaces",
    "guest",
    "lastRestart",
    "snapshots",
    "cluster",
];

/// The merge patch that makes the stored status equal to `status`.
pub fn status_patch(status: &MachineStatus) -> Value {
    let mut fields = match serde_json::to_value(status) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for f in STATUS_FIELDS {
        fields.entry(*f).or_insert(Value::Null);
    }
    serde_json::json!({ "status": fields })
}

/// Writes `status`; returns the Machine as the API server stored it (what it kept of the
/// status may be less than was sent: see `decide::status_write::pruned`).
pub async fn write_status(
    api: &Api<Machine>,
    name: &str,
    status: &MachineStatus,
) -> Result<Machine, kube::Error> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch_status(name, &params, &Patch::Merge(status_patch(status)))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_patch_clears_unset_fields() {
        let s = MachineStatus {
            phase: Some("Running".into()),
            ..MachineStatus::default()
        };
        let p = status_patch(&s);
        assert_eq!(p["status"]["phase"], "Running");
        assert_eq!(p["status"]["nodeName"], Value::Null);
        assert_eq!(p["status"]["conditions"], Value::Null);
        assert_eq!(p["status"].as_object().unwrap().len(), STATUS_FIELDS.len());
    }
}
