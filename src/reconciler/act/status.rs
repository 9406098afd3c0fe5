//! The Machine's status writes: the status is computed (or, while its remote
//! cluster cannot be worked on, only marked unready), stripped of what the served CRD does not
//! keep, paced (progress-only changes at most every 10 s), written, and announced by Events,
//! all through one [`write`]. The rules are pure, in `decide::status` and `decide::status_write`.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;

use crate::api::{Machine, MachineStatus};

use super::{apply, events};
use crate::reconciler::decide::eviction::EVICTION_REQUESTED;
use crate::reconciler::decide::status::{self, Reconciled};
use crate::reconciler::decide::status_write::{self, StatusWrite};
use crate::reconciler::error::Error;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::remotes::{CACHES_FILLING, Unready};
use crate::reconciler::run::watches::key_of;
use crate::telemetry::metrics::Eviction;

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
    let new = write(ctx, machine, api, old, new, now, |notices, new| {
        if let Some(v) = reconciled.provisioning.filter(|v| !v.ready) {
            // CDI's steps are announced by their own Events (a start, not a Warning per phase).
            notices.retain(|n| n.reason != v.reason);
        }
        notices.extend(provisioning_notices(old, new));
    })
    .await?;
    Ok(Outcome {
        status: new,
        write_in: None,
    })
}

/// While the Machine's remote cluster `name` cannot be worked on: the previous status with
/// `ClusterReady` and `Ready` False for `why`, written when that changes anything (not while the
/// cluster's caches fill: that is brief, and its Machines run again once they are filled).
pub async fn unready(
    ctx: &Context,
    machine: &Machine,
    name: &str,
    why: &Unready,
) -> Result<(), Error> {
    if why.reason == CACHES_FILLING {
        return Ok(());
    }
    let ns = machine.namespace().ok_or(Error::NoNamespace)?;
    let key = key_of(machine);
    let stored = ctx
        .statuses
        .newer_than(&key, machine.resource_version().as_deref());
    let old = stored.as_ref().or(machine.status.as_ref());
    let reason = (name, why.reason.as_str(), why.message.as_str());
    let new = status::cluster::unready(old, machine.metadata.generation, reason, Timestamp::now());
    if status::differs(old, &new) {
        let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
        write(ctx, machine, &api, old, new, Instant::now(), |_, _| {}).await?;
    }
    Ok(())
}

/// The one status write: `new` (it differs from `old`) written at `now`, the fields the served
/// CRD pruned learnt, what was kept remembered, and the change announced by Events (`adjust`
/// amends them) in the background: an Event never holds up the next Machine. Returns the status
/// as kept.
async fn write(
    ctx: &Context,
    machine: &Machine,
    api: &Api<Machine>,
    old: Option<&MachineStatus>,
    new: MachineStatus,
    now: Instant,
    adjust: impl FnOnce(&mut Vec<events::Notice>, &MachineStatus),
) -> Result<MachineStatus, Error> {
    let key = key_of(machine);
    let served = &ctx.settings.served_status;
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
    let mut notices = events::notices(old, &new);
    adjust(&mut notices, &new);
    record_evictions(ctx, &new, &notices);
    if !notices.is_empty() {
        let recorder = ctx.events.clone();
        let machine = machine.clone();
        let span = tracing::Span::current();
        tokio::spawn(tracing::Instrument::instrument(
            async move { events::publish(&recorder, &machine, notices).await },
            span,
        ));
    }
    Ok(new)
}

/// Counts a drain reaching the VM once, when `EvictionRequested` appears (its Warning Event).
fn record_evictions(ctx: &Context, new: &MachineStatus, notices: &[events::Notice]) {
    let drained = (new.conditions.iter())
        .filter(|c| c.type_ == EVICTION_REQUESTED && c.status == "True")
        .filter(|c| notices.iter().any(|n| n.reason == c.reason));
    for c in drained {
        let label = Eviction {
            reason: c.reason.clone(),
        };
        ctx.settings
            .metrics
            .eviction_requests
            .get_or_create(&label)
            .inc();
    }
}
