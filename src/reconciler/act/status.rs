//! The Machine's status and finalizer writes: the status is computed, stripped of what the
//! served CRD does not keep, paced (progress-only changes at most every 10 s), written, and
//! announced by Events. The rules are pure, in `decide::status` and `decide::status_write`.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::{Machine, MachineStatus};

use super::{apply, events};
use crate::reconciler::FIELD_MANAGER;
use crate::reconciler::decide::status::{self, Reconciled};
use crate::reconciler::decide::status_write::{self, StatusWrite};
use crate::reconciler::error::Error;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::watches::key_of;

/// Adds the finalizer, guarded by the resourceVersion it was computed from.
pub async fn add_finalizer(api: &Api<Machine>, machine: &Machine) -> Result<(), kube::Error> {
    let mut list = machine.finalizers().to_vec();
    list.push(crate::reconciler::FINALIZER.to_owned());
    let patch = json!({"metadata": {
        "finalizers": list,
        "resourceVersion": machine.resource_version(),
    }});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(&machine.name_any(), &params, &Patch::Merge(patch))
        .await
        .map(drop)
}

/// The status computed, and when to run again to write a progress held back (`None`: nothing
/// is held back).
pub struct Outcome {
    pub status: MachineStatus,
    pub write_in: Option<Duration>,
}

/// Computes the status; writes it and publishes Events only when it changed, and a change of
/// import progress alone at most every `PROGRESS_EVERY`.
pub async fn update(
    machine: &Machine,
    api: &Api<Machine>,
    reconciled: &Reconciled<'_>,
    ctx: &Context,
    provisioning_notices: impl FnOnce(Option<&MachineStatus>, &MachineStatus) -> Vec<events::Notice>,
) -> Result<Outcome, Error> {
    let key = key_of(machine);
    let ours = ctx
        .statuses
        .newer_than(&key, machine.resource_version().as_deref());
    let old = ours.as_ref().or(machine.status.as_ref());
    let served = &ctx.settings.served_status;
    let computed = status::compute(
        old,
        machine.metadata.generation,
        reconciled,
        Timestamp::now(),
    );
    // Fields the served CRD prunes never make the status differ.
    let new = status_write::without(&computed, &served.pruned());
    let now = Instant::now();
    let last_write = ctx.per_machine.last_status_write(&key);
    match status_write::pace(old, &new, last_write, now) {
        StatusWrite::Unchanged => {
            return Ok(Outcome {
                status: new,
                write_in: None,
            });
        }
        StatusWrite::Later(due) => {
            let write_in = due.saturating_duration_since(now);
            tracing::debug!(?write_in, "only import progress changed: written later");
            return Ok(Outcome {
                status: new,
                write_in: Some(write_in),
            });
        }
        StatusWrite::Now => {}
    }
    let stored = apply::write_status(api, &machine.name_any(), &new).await?;
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
    // Published in the background: an Event never holds up the next Machine.
    let mut notices = events::notices(old, &new);
    if let Some(v) = reconciled.provisioning.filter(|v| !v.ready) {
        // CDI's steps are announced by their own Events (a start, not a Warning per phase).
        notices.retain(|n| n.reason != v.reason);
    }
    notices.extend(provisioning_notices(old, &new));
    if !notices.is_empty() {
        let recorder = ctx.events.clone();
        let machine = machine.clone();
        let span = tracing::Span::current();
        tokio::spawn(tracing::Instrument::instrument(
            async move { events::publish(&recorder, &machine, notices).await },
            span,
        ));
    }
    Ok(Outcome {
        status: new,
        write_in: None,
    })
}
