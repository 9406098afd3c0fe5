//! The schedule: every tick, each Machine with `spec.snapshots` is planned by
//! [`super::schedule::plan`] at the clock's time from its own scheduled MachineSnapshots; the
//! due one is made (under the first free name) and those retention lets go deleted (exactly
//! those, by uid).
//!
//! "Own" is proven, never read from a label: the operator puts its made-for proof
//! (`vitistack.io/made-for`, over the snapshot's namespace and name and the Machine's name and
//! uid) on each snapshot it schedules, in the write that creates it. A snapshot anyone else
//! made, whatever its labels and annotations, is neither counted nor deleted, and one made for
//! an earlier Machine of the same name belongs to that Machine's uid, not to this one. The due
//! time is read from the proven name. Errors are per Machine: one failing Machine (a namespace
//! at its quota) never stops another's, and is tried again with backoff.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};

mod scheduled;
mod seen;

use scheduled::scheduled_only;
pub use seen::Retries;
use seen::{Seen, Who, seen};

use super::context::Context;
use super::schedule::{Rules, candidates, plan};
use super::snapshot::scoped;
use crate::api::Machine;
use crate::api::names::{FIELD_MANAGER, MACHINE_LABEL, PROOF_ANNOTATION};
use crate::api::snapshots::{
    MachineSnapshot, MachineSnapshotSpec, MachineSnapshotStatus, SCHEDULED_FOR_ANNOTATION,
    SCHEDULED_LABEL, SCHEDULED_PROOF_KIND, parse_schedule,
};
use crate::reconciler::decide::evidence::{OwnershipKey, Target};
use crate::reconciler::run::watches::Scope;

/// The kind the made-for proof of a scheduled snapshot names.
pub const KIND: &str = SCHEDULED_PROOF_KIND;
/// The kind named by the proof a last-resort snapshot name is derived from.
const NAME_KIND: &str = "MachineSnapshotName";
/// Characters of that name's secret suffix.
const SECRET_LEN: usize = 10;

pub async fn run(
    ctx: Arc<Context>,
    scope: &Scope,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    // Watched, not listed each tick: a converged cluster costs no request per tick. Both are
    // kept slim (only what a schedule reads), and only Machines with a schedule are kept. Every
    // MachineSnapshot is watched, not only the labelled ones: a label proves nothing, and a name
    // held by anyone must be seen.
    let (machines, machines_w) = reflector::store::<Machine>();
    let machine_watch = watcher(scoped::<Machine>(&ctx.client, scope), Default::default())
        .default_backoff()
        .filter_map(|e| futures::future::ready(e.map(scheduled_only).transpose()))
        .reflect(machines_w)
        .for_each(|_| futures::future::ready(()));
    let (snapshots, snapshots_w) = reflector::store::<MachineSnapshot>();
    let snapshot_watch = watcher(
        scoped::<MachineSnapshot>(&ctx.client, scope),
        Default::default(),
    )
    .default_backoff()
    .modify(slim_snapshot)
    .reflect(snapshots_w)
    .for_each(|_| futures::future::ready(()));
    let checks = async {
        if machines.wait_until_ready().await.is_err() || snapshots.wait_until_ready().await.is_err()
        {
            return;
        }
        let mut retries = Retries::default();
        let mut every = tokio::time::interval(ctx.settings.tick);
        // A long check (many Machines due) is followed by one tick, not a burst of missed ones.
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let (m, s) = (machines.state(), snapshots.state());
            let m: Vec<&Machine> = m.iter().map(AsRef::as_ref).collect();
            let s: Vec<&MachineSnapshot> = s.iter().map(AsRef::as_ref).collect();
            let report = tick_with(&ctx, &m, &s, &mut retries).await;
            for (machine, e) in &report.failed {
                tracing::warn!(%machine, error = %e, "snapshot schedule not served this time");
            }
            if !report.deferred.is_empty() {
                tracing::info!(
                    machines = report.deferred.len(),
                    max = ctx.settings.limits.max_in_flight,
                    "scheduled snapshots wait for one in flight to finish"
                );
            }
        }
    };
    tokio::select! {
        () = machine_watch => {}
        () = snapshot_watch => {}
        () = checks => {}
        () = shutdown => {}
    }
}

/// Only what a schedule reads: names, uid, times, the proof, the Machine, and progress.
fn slim_snapshot(s: &mut MachineSnapshot) {
    let proof = s.annotations().get(PROOF_ANNOTATION).cloned();
    s.metadata.annotations = proof.map(|p| [(PROOF_ANNOTATION.to_owned(), p)].into());
    s.metadata.labels = None;
    s.metadata.managed_fields = None;
    s.metadata.owner_references = None;
    s.status = s.status.take().map(|st| MachineSnapshotStatus {
        phase: st.phase,
        virtual_machine_snapshot_name: st.virtual_machine_snapshot_name,
        ..MachineSnapshotStatus::default()
    });
}

/// What one check did; Machines are named `<namespace>/<name>`.
#[derive(Debug, Default)]
pub struct Report {
    /// Snapshots made.
    pub made: Vec<String>,
    /// Snapshots retention deleted.
    pub deleted: Vec<String>,
    /// Machines due that wait for a snapshot in flight to finish.
    pub deferred: Vec<String>,
    /// Machines whose schedule failed this time, and why.
    pub failed: Vec<(String, String)>,
    /// Machines whose schedule failed lately, left alone until their retry is due.
    pub waiting: Vec<String>,
}

/// One check of every schedule, of `machines` with every MachineSnapshot in their scope.
pub async fn tick(ctx: &Context, machines: &[&Machine], snapshots: &[&MachineSnapshot]) -> Report {
    tick_with(ctx, machines, snapshots, &mut Retries::default()).await
}

/// [`tick`], leaving Machines whose schedule failed lately alone until their retry is due.
pub async fn tick_with(
    ctx: &Context,
    machines: &[&Machine],
    snapshots: &[&MachineSnapshot],
    retries: &mut Retries,
) -> Report {
    let now = ctx.settings.clock.now();
    let mut tried = Vec::new();
    let report = check(ctx, machines, snapshots, retries, &mut tried, now).await;
    retries.record(&tried, &report.failed, now);
    report
}

async fn check(
    ctx: &Context,
    machines: &[&Machine],
    snapshots: &[&MachineSnapshot],
    retries: &Retries,
    tried: &mut Vec<String>,
    now: DateTime<Utc>,
) -> Report {
    let limits = ctx.settings.limits;
    let seen = seen(&ctx.key, snapshots);
    let mut report = Report::default();
    let mut due: Vec<(DateTime<Utc>, Who)> = Vec::new();
    for m in machines.iter().copied() {
        let (Some(schedule), Some(uid)) = (m.spec.snapshots.as_ref(), m.uid()) else {
            continue;
        };
        if m.meta().deletion_timestamp.is_some() {
            continue;
        }
        let Ok(cron) = parse_schedule(&schedule.schedule) else {
            continue; // The webhook refuses it; one stored around it is skipped.
        };
        let who = (m.namespace().unwrap_or_default(), m.name_any(), uid);
        let key = format!("{}/{}", who.0, who.1);
        if retries.waiting(&key, now) {
            report.waiting.push(key);
            continue;
        }
        tried.push(key);
        let created = m
            .meta()
            .creation_timestamp
            .as_ref()
            .and_then(|t| DateTime::<Utc>::from_timestamp(t.0.as_second(), 0))
            .unwrap_or(now);
        let rules = Rules {
            keep: usize::try_from(schedule.keep()).unwrap_or(1),
            min_interval: chrono::Duration::from_std(limits.min_interval).unwrap_or_default(),
        };
        let own = seen.own.get(&who).map_or(&[][..], Vec::as_slice);
        let p = plan(created, &cron, rules, own, now);
        if let Some(d) = p.create {
            due.push((d, who.clone()));
        }
        let (ns, name, _) = &who;
        let api: Api<MachineSnapshot> = Api::namespaced(ctx.client.clone(), ns);
        for gone in &p.delete {
            let Some(uid) = seen.uids.get(&(ns.clone(), gone.clone())) else {
                continue;
            };
            match delete_exact(&api, gone, uid.clone()).await {
                Ok(()) => {
                    tracing::info!(machine = %name, namespace = %ns, snapshot = %gone, "scheduled snapshot let go by retention deleted");
                    report.deleted.push(format!("{ns}/{gone}"));
                }
                Err(e) => report.failed.push((format!("{ns}/{name}"), e.to_string())),
            }
        }
    }
    // The longest due first; at most `max_in_flight` being taken at once. A create that
    // failed (its namespace at its quota) made nothing to wait for: the next one takes its slot.
    due.sort();
    let mut slots = limits.max_in_flight.saturating_sub(seen.in_flight);
    for (d, (ns, name, uid)) in due {
        if slots == 0 {
            report.deferred.push(format!("{ns}/{name}"));
            continue;
        }
        let api: Api<MachineSnapshot> = Api::namespaced(ctx.client.clone(), &ns);
        match create(ctx, &api, &seen, (&ns, &name, &uid), d).await {
            Ok(made) => {
                tracing::info!(machine = %name, namespace = %ns, snapshot = %made, "scheduled snapshot made");
                report.made.push(format!("{ns}/{made}"));
                slots -= 1;
            }
            Err(e) => report.failed.push((format!("{ns}/{name}"), e)),
        }
    }
    report
}

/// The part of a name only the operator's key can tell in advance.
fn secret(key: &OwnershipKey, ns: &str, machine: &str, uid: &str, due: DateTime<Utc>) -> String {
    let stamp = due.format("%Y%m%d%H%M").to_string();
    let target = Target {
        kind: NAME_KIND,
        namespace: ns,
        name: &stamp,
    };
    let proof = key.proof(&target, machine, uid);
    let tag = proof.rsplit('.').next().unwrap_or_default();
    tag.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(SECRET_LEN)
        .collect()
}

/// Makes Machine `(ns, name, uid)`'s snapshot due at `due` under the first name nobody else
/// holds; its name. One an earlier leader made stands.
async fn create(
    ctx: &Context,
    api: &Api<MachineSnapshot>,
    seen: &Seen,
    (ns, machine, uid): (&str, &str, &str),
    due: DateTime<Utc>,
) -> Result<String, String> {
    let held: BTreeSet<&str> = seen
        .uids
        .keys()
        .filter(|(n, _)| n == ns)
        .map(|(_, name)| name.as_str())
        .collect();
    let names = candidates(machine, due, &secret(&ctx.key, ns, machine, uid, due));
    for name in names.iter().filter(|n| !held.contains(n.as_str())) {
        let target = Target {
            kind: KIND,
            namespace: ns,
            name,
        };
        let mut s = MachineSnapshot::new(
            name,
            MachineSnapshotSpec {
                machine_name: machine.to_owned(),
            },
        );
        s.metadata = ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([
                (SCHEDULED_LABEL.to_owned(), "true".to_owned()),
                (MACHINE_LABEL.to_owned(), machine.to_owned()),
            ])),
            annotations: Some(BTreeMap::from([
                (
                    SCHEDULED_FOR_ANNOTATION.to_owned(),
                    due.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                ),
                (
                    PROOF_ANNOTATION.to_owned(),
                    ctx.key.proof(&target, machine, uid),
                ),
            ])),
            ..ObjectMeta::default()
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match api.create(&params, &s).await {
            Ok(_) => return Ok(name.clone()),
            // Held: by our own (an earlier leader's, not yet seen) it stands; else the next.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let there = api.get_opt(name).await.map_err(|e| e.to_string())?;
                if there.is_some_and(|t| ctx.key.made_for(KIND, t.meta(), machine) == Some(uid)) {
                    return Ok(name.clone());
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "every name for the snapshot due {due} is held by another object: {names:?}"
    ))
}

async fn delete_exact(
    api: &Api<MachineSnapshot>,
    name: &str,
    uid: String,
) -> Result<(), kube::Error> {
    let dp = DeleteParams::default().preconditions(Preconditions {
        uid: Some(uid),
        resource_version: None,
    });
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
