//! The Machine's status, between act and its write: computed from what was observed, decided
//! and written (the rules are pure: `decide::status`, `decide::volumes`,
//! `decide::status_write`), paced (progress-only changes at most every 10 s), and handed to
//! [`act::status::write`](crate::reconciler::act::status::write) when it changed.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;

use crate::api::operations::RUN_STRATEGY_HALTED;
use crate::api::{Machine, MachineStatus};

use super::cluster::Cluster;
use super::context::Context;
use super::metrics;
use super::remotes::CACHES_FILLING;
use super::watches::key_of;
use crate::reconciler::act::{self, Acted};
use crate::reconciler::decide::desired::meta::pvc_name;
use crate::reconciler::decide::status::{self, Reconciled};
use crate::reconciler::decide::status_write::{self, StatusWrite};
use crate::reconciler::decide::volumes::{self, Seen};
use crate::reconciler::decide::{hotplug, own_vmi};
use crate::reconciler::error::Error;
use crate::reconciler::observe::Observed;

/// The status as computed (written, or held back), and what it means for the next run.
pub struct Settled {
    pub status: MachineStatus,
    /// Something blocks the Machine: retry with backoff.
    pub blocked: bool,
    /// A write held back (import progress), or a node within its grace: run again then.
    pub write_status_in: Option<Duration>,
}

/// Computes the status of `o` after `acted`; writes it and publishes its Events only when it
/// changed, and a change of import progress alone at most every `PROGRESS_EVERY`.
pub async fn settle(
    ctx: &Context,
    cluster: &Cluster,
    o: &Observed,
    acted: Acted,
) -> Result<Settled, Error> {
    let machine = &o.machine;
    let machine_name = machine.name_any();
    let running = o.run_strategy.as_str();
    let claim_view: Vec<(String, Option<&PersistentVolumeClaim>)> = (o.spec.disks.iter())
        .filter(|d| d.source.is_none())
        .map(|d| {
            let n = pvc_name(&machine_name, &d.name);
            let p = acted.claims.iter().find(|p| p.name_any() == n);
            (n, p)
        })
        .collect();
    // CDI's claims (of the DataVolumes) as observed; the blank disks' as just written.
    let cdi_claims =
        (o.claims.values()).filter(|c| o.sourced.iter().any(|v| v.claim_name == c.name_any()));
    let seen = Seen {
        data_volumes: volumes::by_name(&acted.data_volumes, o.data_volumes.values()),
        claims: volumes::by_name(&acted.claims, cdi_claims),
        cdi_installed: o.cdi_installed,
    };
    let mut provisioning = volumes::view(&machine_name, &o.spec, &seen);
    let vmi = own_vmi(acted.vm.as_ref(), o.vmi.as_ref());
    hotplug::show(&mut provisioning.disks, &acted.hotplug, vmi);
    let verdict = provisioning.verdict.as_ref();
    let provisioning_notices = |old: Option<&MachineStatus>, new: &MachineStatus| {
        volumes::notices(&machine_name, &o.spec, &seen, old, new, verdict)
    };
    let problems = &acted.problems;
    let vm = acted.vm.as_ref();
    let reconciled = Reconciled {
        running: running != RUN_STRATEGY_HALTED,
        problems,
        vm,
        vmi,
        claims: claim_view,
        networks: o.spec.networks.len(),
        spec_networks: &o.spec.networks,
        provisioning: verdict,
        disks: provisioning.disks.clone(),
        retain: acted.retain,
        last_restart: acted.restart.last_restart.clone(),
        last_restart_generation: acted.restart.last_restart_generation,
        restoring: (o.restoring.as_ref()).map(|(name, step)| (name.as_str(), step.as_str())),
        snapshots: Some(&o.snapshots),
        cluster: cluster.name.as_deref(),
        cluster_identity: cluster.identity.as_deref(),
        eviction: acted.eviction.as_ref(),
        node: acted.node.unreachable(),
        restart_pending: acted.restart_pending.as_ref(),
        hotplug: Some(&acted.hotplug),
    };

    let key = key_of(machine);
    let ours = (ctx.statuses).newer_than(&key, machine.resource_version().as_deref());
    let old = ours.as_ref().or(machine.status.as_ref());
    let computed = status::compute(
        old,
        machine.metadata.generation,
        &reconciled,
        Timestamp::now(),
    );
    // Fields the served CRD prunes never make the status differ.
    let new = status_write::without(&computed, &ctx.settings.served_status.pruned());
    let now = Instant::now();
    let last_write = ctx.per_machine.last_status_write(&key);
    let (status, write_in) = match status_write::pace(old, &new, last_write, now) {
        StatusWrite::Unchanged => (new, None),
        StatusWrite::Later(due) => {
            let write_in = due.saturating_duration_since(now);
            tracing::debug!(?write_in, "only import progress changed: written later");
            (new, Some(write_in))
        }
        StatusWrite::Now => {
            let ns = machine.namespace().unwrap_or_default();
            let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
            let adjust = |notices: &mut Vec<act::events::Notice>, new: &MachineStatus| {
                if let Some(v) = verdict.filter(|v| !v.ready) {
                    // CDI's steps are announced by their own Events (a start, not a Warning per
                    // phase).
                    notices.retain(|n| n.reason != v.reason);
                }
                notices.extend(provisioning_notices(old, new));
            };
            let kept = act::status::write(ctx, machine, &api, old, new, now, adjust).await?;
            (kept, None)
        }
    };
    metrics::record_problems(&ctx.settings.metrics, problems);
    // A DataVolume failure is counted by its reason too (a fixed word, never CDI's phase), once:
    // CDINotInstalled is a problem as well.
    if let Some(v) = verdict
        .filter(|v| !v.ready && !v.waiting)
        .filter(|v| !problems.iter().any(|p| p.reason() == v.reason))
    {
        metrics::record_error(&ctx.settings.metrics, &v.reason);
    }
    Ok(Settled {
        status,
        blocked: !problems.is_empty(),
        // A node within its grace, a restart waiting or under way: run again then.
        write_status_in: [write_in, acted.node.recheck_in(), acted.restart_recheck_in]
            .into_iter()
            .flatten()
            .min(),
    })
}

/// The previous status with `ClusterReady` and `Ready` False for `(cluster, reason, message)`,
/// written when that changes anything (not while the cluster's caches fill: that is brief, and
/// its Machines run again once they are filled).
pub async fn unready(
    ctx: &Context,
    machine: &Machine,
    why: (&str, &str, &str),
) -> Result<(), Error> {
    if why.1 == CACHES_FILLING {
        return Ok(());
    }
    let stored = (ctx.statuses).newer_than(&key_of(machine), machine.resource_version().as_deref());
    let old = stored.as_ref().or(machine.status.as_ref());
    let generation = machine.metadata.generation;
    let new = status::cluster_unready(old, generation, why, Timestamp::now());
    if status_write::differs(old, &new) {
        let ns = machine.namespace().unwrap_or_default();
        let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
        let now = std::time::Instant::now();
        act::status::write(ctx, machine, &api, old, new, now, |_, _| {}).await?;
    }
    Ok(())
}
