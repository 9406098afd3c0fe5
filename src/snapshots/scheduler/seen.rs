//! What a check reads from the caches (the operator's own scheduled snapshots, by Machine uid)
//! and remembers between checks (the Machines to retry later).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kube::{Resource, ResourceExt};

use super::KIND;
use crate::api::snapshots::{MachineSnapshot, snapshot_phase};
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::snapshots::schedule::{Outcome, Own, due_of, retry_after};

/// A Machine: its namespace, name and uid.
pub(super) type Who = (String, String, String);

/// The operator's own scheduled snapshots, by Machine (uid), with their object uids.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) own: BTreeMap<Who, Vec<Own>>,
    pub(super) uids: BTreeMap<(String, String), String>,
    /// Own snapshots KubeVirt is taking (or about to).
    pub(super) in_flight: usize,
}

pub(super) fn seen(key: &OwnershipKey, snapshots: &[&MachineSnapshot]) -> Seen {
    let mut seen = Seen::default();
    for s in snapshots {
        let machine = s.spec.machine_name.as_str();
        let ns = s.namespace().unwrap_or_default();
        seen.uids
            .insert((ns.clone(), s.name_any()), s.uid().unwrap_or_default());
        if s.meta().deletion_timestamp.is_some() {
            continue;
        }
        let Some(machine_uid) = key.made_for(KIND, s.meta(), machine) else {
            continue;
        };
        let Some(due) = due_of(machine, &s.name_any()) else {
            continue;
        };
        let status = s.status.as_ref();
        let outcome = match status.and_then(|st| st.phase.as_deref()) {
            Some(snapshot_phase::SUCCEEDED) => Outcome::Succeeded,
            Some(snapshot_phase::FAILED) => Outcome::Failed,
            _ => Outcome::Running,
        };
        // Not yet looked at, or handed to KubeVirt; one waiting for a VM is not in flight.
        let started = status
            .is_none_or(|st| st.phase.is_none() || st.virtual_machine_snapshot_name.is_some());
        if outcome == Outcome::Running && started {
            seen.in_flight += 1;
        }
        let who = (ns, machine.to_owned(), machine_uid.to_owned());
        seen.own.entry(who).or_default().push(Own {
            name: s.name_any(),
            due,
            outcome,
        });
    }
    seen
}

/// Machines (`<namespace>/<name>`) whose schedule failed: how often in a row, and when it is
/// tried again ([`super::schedule::retry_after`]).
#[derive(Debug, Default)]
pub struct Retries(BTreeMap<String, (u32, DateTime<Utc>)>);

impl Retries {
    pub(super) fn waiting(&self, machine: &str, now: DateTime<Utc>) -> bool {
        self.0.get(machine).is_some_and(|(_, next)| *next > now)
    }

    pub(super) fn record(
        &mut self,
        tried: &[String],
        failed: &[(String, String)],
        now: DateTime<Utc>,
    ) {
        for m in tried {
            if failed.iter().any(|(f, _)| f == m) {
                let n = self.0.get(m).map_or(0, |(n, _)| *n).saturating_add(1);
                self.0.insert(m.clone(), (n, now + retry_after(n)));
            } else {
                self.0.remove(m);
            }
        }
    }
}
