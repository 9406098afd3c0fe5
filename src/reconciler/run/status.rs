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
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;
use crate::reconciler::decide::desired::meta::pvc_name;
use crate::reconciler::decide::notices::Notice;
use crate::reconciler::decide::status::{self, Reconciled};
use crate::reconciler::decide::status_write::{self, StatusWrite};
use crate::reconciler::decide::volumes::{self, Provisioning, Seen};
use crate::reconciler::decide::{hotplug, own_vmi};
use crate::reconciler::error::Error;
use crate::reconciler::observe::Observed;

/// What a run came to, for its status.
pub enum Worked<'a> {
    /// Its cluster cannot be worked on, or (remote) its namespace there is not the operator's:
    /// nothing was made, changed or deleted, and `ClusterReady` says why.
    Refused(Refusal),
    /// Observed, decided and acted on in its cluster.
    Acted(&'a Cluster, &'a Observed, &'a Acted),
}

/// Why a Machine's cluster was not worked on: the KubevirtConfig's name, its reason (one
/// CamelCase word) and message.
pub struct Refusal {
    pub cluster: String,
    pub reason: String,
    pub message: String,
}

/// The status as computed (written, or held back), and what it means for the next run.
pub struct Settled {
    pub status: MachineStatus,
    /// Something blocks the Machine: retry with backoff.
    pub blocked: bool,
    /// A write held back (import progress), or a node within its grace: run again then.
    pub write_status_in: Option<Duration>,
}

/// Computes the status of `machine` after what the run `worked`; writes it and publishes its
/// Events only when it changed, and a change of import progress alone at most every
/// `PROGRESS_EVERY`. A refused run's status is the previous one with `ClusterReady` and
/// `Ready` False (not while the cluster's caches fill: that is brief, and its Machines run
/// again once they are filled).
pub async fn settle(
    ctx: &Context,
    machine: &Machine,
    worked: Worked<'_>,
) -> Result<Settled, Error> {
    let key = key_of(machine);
    let ours = (ctx.statuses).newer_than(&key, machine.resource_version().as_deref());
    let old = ours.as_ref().or(machine.status.as_ref());
    let generation = machine.metadata.generation;
    let (computed, disks) = match &worked {
        Worked::Refused(r) if r.reason == CACHES_FILLING => {
            return Ok(Settled {
                status: old.cloned().unwrap_or_default(),
                blocked: true,
                write_status_in: None,
            });
        }
        Worked::Refused(r) => {
            let why = (r.cluster.as_str(), r.reason.as_str(), r.message.as_str());
            let new = status::cluster_unready(old, generation, why, Timestamp::now());
            (new, None)
        }
        Worked::Acted(cluster, o, acted) => {
            let disks = Disks::of(o, acted);
            let reconciled = disks.reconciled(cluster, acted);
            let new = status::compute(old, generation, &reconciled, Timestamp::now());
            (new, Some(disks))
        }
    };
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
            let adjust = |notices: &mut Vec<Notice>, new: &MachineStatus| {
                if let Some(d) = &disks {
                    d.adjust(notices, old, new);
                }
            };
            let kept = act::status::write(ctx, machine, &api, old, new, now, adjust).await?;
            (kept, None)
        }
    };
    let (Worked::Acted(_, _, acted), Some(disks)) = (&worked, &disks) else {
        return Ok(Settled {
            status,
            blocked: true,
            write_status_in: None,
        });
    };
    let problems = &acted.problems;
    metrics::record_problems(&ctx.settings.metrics, problems);
    // A DataVolume failure is counted by its reason too (a fixed word, never CDI's phase), once:
    // CDINotInstalled is a problem as well.
    if let Some(v) = (disks.provisioning.verdict.as_ref())
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

/// An acted-on Machine's disks as the status shows them: its claims and DataVolumes as written
/// (else as observed), their provisioning, and the hot-plugged ones' phase.
struct Disks<'a> {
    machine_name: String,
    o: &'a Observed,
    seen: Seen<'a>,
    provisioning: Provisioning,
    vmi: Option<&'a VirtualMachineInstance>,
}

impl<'a> Disks<'a> {
    fn of(o: &'a Observed, acted: &'a Acted) -> Self {
        let machine_name = o.machine.name_any();
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
        Disks {
            machine_name,
            o,
            seen,
            provisioning,
            vmi,
        }
    }

    /// What `status::compute` reads of the run in `cluster` that came to `acted`.
    fn reconciled(&self, cluster: &'a Cluster, acted: &'a Acted) -> Reconciled<'_> {
        let o = self.o;
        let claims: Vec<(String, Option<&PersistentVolumeClaim>)> = (o.spec.disks.iter())
            .filter(|d| d.source.is_none())
            .map(|d| {
                let n = pvc_name(&self.machine_name, &d.name);
                let p = acted.claims.iter().find(|p| p.name_any() == n);
                (n, p)
            })
            .collect();
        Reconciled {
            running: o.run_strategy.as_str() != RUN_STRATEGY_HALTED,
            problems: &acted.problems,
            vm: acted.vm.as_ref(),
            vmi: self.vmi,
            claims,
            networks: o.spec.networks.len(),
            spec_networks: &o.spec.networks,
            provisioning: self.provisioning.verdict.as_ref(),
            disks: self.provisioning.disks.clone(),
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
        }
    }

    /// The provisioning Events for the change from `old` to `new`, in place of the failing
    /// verdict's own: CDI's steps are announced by their own Events (a start, not a Warning per
    /// phase).
    fn adjust(&self, notices: &mut Vec<Notice>, old: Option<&MachineStatus>, new: &MachineStatus) {
        let verdict = self.provisioning.verdict.as_ref();
        if let Some(v) = verdict.filter(|v| !v.ready) {
            notices.retain(|n| n.reason != v.reason);
        }
        let (name, spec) = (&self.machine_name, &self.o.spec);
        notices.extend(volumes::notices(name, spec, &self.seen, old, new, verdict));
    }
}
