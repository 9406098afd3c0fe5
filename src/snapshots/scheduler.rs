//! The schedule: every tick, each Machine with `spec.snapshots` is planned by
//! [`super::schedule::plan`] at the clock's time, from the scheduled MachineSnapshots that exist;
//! the due one is made and those beyond `keep` deleted (exactly those, by uid).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::schedule::{Taken, plan};
use super::snapshot::scoped;
use crate::api::names::{FIELD_MANAGER, MACHINE_LABEL};
use crate::api::snapshots::{
    MachineSnapshot, MachineSnapshotSpec, SCHEDULED_FOR_ANNOTATION, SCHEDULED_LABEL, parse_schedule,
};
use crate::api::{Machine, MachineSpec};
use crate::reconciler::run::watches::Scope;

pub async fn run(
    ctx: Arc<Context>,
    scope: &Scope,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    // Watched, not listed each tick: a converged cluster costs no request per tick. The Machines
    // are kept slim (only what a schedule needs).
    let (machines, machines_w) = reflector::store::<Machine>();
    let machine_watch = watcher(scoped::<Machine>(&ctx.client, scope), Default::default())
        .default_backoff()
        .modify(slim)
        .reflect(machines_w)
        .for_each(|_| futures::future::ready(()));
    let (snapshots, snapshots_w) = reflector::store::<MachineSnapshot>();
    let labelled = watcher::Config::default().labels(&format!("{SCHEDULED_LABEL}=true"));
    let snapshot_watch = watcher(scoped::<MachineSnapshot>(&ctx.client, scope), labelled)
        .default_backoff()
        .reflect(snapshots_w)
        .for_each(|_| futures::future::ready(()));
    let checks = async {
        if machines.wait_until_ready().await.is_err() || snapshots.wait_until_ready().await.is_err()
        {
            return;
        }
        let mut every = tokio::time::interval(ctx.settings.tick);
        loop {
            every.tick().await;
            let (m, s) = (machines.state(), snapshots.state());
            let m: Vec<&Machine> = m.iter().map(AsRef::as_ref).collect();
            let s: Vec<&MachineSnapshot> = s.iter().map(AsRef::as_ref).collect();
            if let Err(e) = tick(&ctx, &m, &s).await {
                tracing::warn!(error = %e, "snapshot schedules not checked this time");
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

/// Only what a schedule reads: names, uid, times, and `spec.snapshots`.
fn slim(m: &mut Machine) {
    m.spec = MachineSpec {
        snapshots: m.spec.snapshots.take(),
        ..MachineSpec::default()
    };
    m.status = None;
    m.metadata.annotations = None;
    m.metadata.labels = None;
    m.metadata.managed_fields = None;
    m.metadata.finalizers = None;
    m.metadata.owner_references = None;
}

/// One check of every schedule, of `machines` with the scheduled MachineSnapshots `scheduled`
/// (labelled [`SCHEDULED_LABEL`]).
pub async fn tick(
    ctx: &Context,
    machines: &[&Machine],
    scheduled: &[&MachineSnapshot],
) -> Result<(), Error> {
    let now = ctx.settings.clock.now();
    let mut by_machine: BTreeMap<(String, String), Vec<&MachineSnapshot>> = BTreeMap::new();
    for s in scheduled.iter().copied() {
        if s.meta().deletion_timestamp.is_some() {
            continue;
        }
        let key = (
            s.namespace().unwrap_or_default(),
            s.spec.machine_name.clone(),
        );
        by_machine.entry(key).or_default().push(s);
    }
    for m in machines.iter().copied() {
        let Some(schedule) = m.spec.snapshots.as_ref() else {
            continue;
        };
        if m.meta().deletion_timestamp.is_some() {
            continue;
        }
        let Ok(cron) = parse_schedule(&schedule.schedule) else {
            continue; // The webhook refuses it; one stored around it is skipped.
        };
        let ns = m.namespace().unwrap_or_default();
        let name = m.name_any();
        let created = m
            .meta()
            .creation_timestamp
            .as_ref()
            .and_then(|t| DateTime::<Utc>::from_timestamp(t.0.as_second(), 0))
            .unwrap_or(now);
        let taken: Vec<Taken> = by_machine
            .get(&(ns.clone(), name.clone()))
            .into_iter()
            .flatten()
            .filter_map(|s| taken(s))
            .collect();
        let keep = usize::try_from(schedule.keep()).unwrap_or(1);
        let p = plan(&name, created, &cron, keep, &taken, now);
        let api: Api<MachineSnapshot> = Api::namespaced(ctx.client.clone(), &ns);
        if let Some(c) = &p.create {
            create(&api, &name, c).await?;
            tracing::info!(machine = %name, namespace = %ns, snapshot = %c.name, "scheduled snapshot made");
        }
        for gone in &p.delete {
            let uid = by_machine
                .get(&(ns.clone(), name.clone()))
                .into_iter()
                .flatten()
                .find(|s| s.name_any() == *gone)
                .and_then(|s| s.uid());
            // The one just made has no uid here: it is never beyond keep on its own.
            let Some(uid) = uid else { continue };
            delete_exact(&api, gone, uid).await?;
            tracing::info!(machine = %name, namespace = %ns, snapshot = %gone, "scheduled snapshot beyond keep deleted");
        }
    }
    Ok(())
}

/// A scheduled snapshot's due time, from its annotation.
fn taken(s: &MachineSnapshot) -> Option<Taken> {
    let due = s.annotations().get(SCHEDULED_FOR_ANNOTATION)?;
    let due = DateTime::parse_from_rfc3339(due).ok()?.with_timezone(&Utc);
    Some(Taken {
        name: s.name_any(),
        due,
    })
}

async fn create(api: &Api<MachineSnapshot>, machine: &str, c: &Taken) -> Result<(), Error> {
    let mut s = MachineSnapshot::new(
        &c.name,
        MachineSnapshotSpec {
            machine_name: machine.to_owned(),
        },
    );
    s.metadata = ObjectMeta {
        name: Some(c.name.clone()),
        labels: Some(BTreeMap::from([
            (SCHEDULED_LABEL.to_owned(), "true".to_owned()),
            (MACHINE_LABEL.to_owned(), machine.to_owned()),
        ])),
        annotations: Some(BTreeMap::from([(
            SCHEDULED_FOR_ANNOTATION.to_owned(),
            c.due.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )])),
        ..ObjectMeta::default()
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, &s).await {
        Ok(_) => Ok(()),
        // Made by an earlier leader, or by hand under that name: it stands for this run.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn delete_exact(api: &Api<MachineSnapshot>, name: &str, uid: String) -> Result<(), Error> {
    let dp = DeleteParams::default().preconditions(Preconditions {
        uid: Some(uid),
        resource_version: None,
    });
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
