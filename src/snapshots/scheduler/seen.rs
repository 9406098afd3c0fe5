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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::names::PROOF_ANNOTATION;
    use crate::api::snapshots::{SCHEDULED_FOR_ANNOTATION, SCHEDULED_LABEL};
    use crate::reconciler::decide::evidence::Target;

    /// A MachineSnapshot `name` of Machine `machine` in `ns`, labelled and annotated as the
    /// schedule's, with `proof` (if any) and `status`.
    fn snap(ns: &str, name: &str, machine: &str, proof: Option<String>) -> MachineSnapshot {
        let mut annotations = json!({SCHEDULED_FOR_ANNOTATION: "2026-01-01T02:00:00Z"});
        if let Some(p) = proof {
            annotations[PROOF_ANNOTATION] = json!(p);
        }
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
            "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
                "labels": {SCHEDULED_LABEL: "true", "vitistack.io/machine": machine},
                "annotations": annotations},
            "spec": {"machineName": machine}
        }))
        .expect("snapshot")
    }

    fn proof(key: &OwnershipKey, ns: &str, name: &str, machine: &str, uid: &str) -> String {
        let target = Target {
            kind: KIND,
            namespace: ns,
            name,
        };
        key.proof(&target, machine, uid)
    }

    #[test]
    fn only_snapshots_proven_for_a_machine_uid_are_its_own() {
        let key = OwnershipKey::new(&[7; 32], None).expect("key");
        let other_key = OwnershipKey::new(&[8; 32], None).expect("key");
        let p = |name: &str, uid: &str| Some(proof(&key, "ns", name, "db", uid));
        let with_status = |mut s: MachineSnapshot, status: serde_json::Value| {
            s.status = Some(serde_json::from_value(status).expect("status"));
            s
        };
        let mut deleting = snap("ns", "db-202601010700", "db", p("db-202601010700", "m1"));
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let list = [
            // The schedule's, for Machine db of uid m1: taken, failed, running, waiting.
            with_status(
                snap("ns", "db-202601010100", "db", p("db-202601010100", "m1")),
                json!({"phase": "Succeeded"}),
            ),
            with_status(
                snap(
                    "ns",
                    "db-202601010200-1",
                    "db",
                    p("db-202601010200-1", "m1"),
                ),
                json!({"phase": "Failed"}),
            ),
            with_status(
                snap("ns", "db-202601010300", "db", p("db-202601010300", "m1")),
                json!({"phase": "InProgress", "virtualMachineSnapshotName": "db-202601010300"}),
            ),
            with_status(
                snap("ns", "db-202601010400", "db", p("db-202601010400", "m1")),
                json!({"phase": "Pending", "reason": "NoVM"}),
            ),
            // An earlier Machine db (uid m0): its own, apart.
            with_status(
                snap("ns", "db-202512310100", "db", p("db-202512310100", "m0")),
                json!({"phase": "Succeeded"}),
            ),
            // Labelled and annotated only (by a user, or by the operator before the proof).
            snap("ns", "db-209901010000", "db", None),
            // A proof copied from another snapshot, another key's, another namespace's.
            snap("ns", "db-209901020000", "db", p("db-202601010100", "m1")),
            snap(
                "ns",
                "db-209901030000",
                "db",
                Some(proof(&other_key, "ns", "db-209901030000", "db", "m1")),
            ),
            snap(
                "ns",
                "db-209901040000",
                "db",
                Some(proof(&key, "elsewhere", "db-209901040000", "db", "m1")),
            ),
            // Proven, but not named `<machine>-<due>`: no due time to count it by.
            snap("ns", "db-by-hand", "db", p("db-by-hand", "m1")),
            // Going: neither counted nor in flight.
            deleting,
        ];
        let refs: Vec<&MachineSnapshot> = list.iter().collect();
        let seen = seen(&key, &refs);
        let who = |uid: &str| ("ns".to_owned(), "db".to_owned(), uid.to_owned());
        let own = |uid: &str| -> Vec<(String, Outcome)> {
            (seen.own.get(&who(uid)).into_iter().flatten())
                .map(|o| (o.name.clone(), o.outcome))
                .collect()
        };
        assert_eq!(
            own("m1"),
            [
                ("db-202601010100".to_owned(), Outcome::Succeeded),
                ("db-202601010200-1".to_owned(), Outcome::Failed),
                ("db-202601010300".to_owned(), Outcome::Running),
                ("db-202601010400".to_owned(), Outcome::Running),
            ]
        );
        assert_eq!(
            own("m0"),
            [("db-202512310100".to_owned(), Outcome::Succeeded)]
        );
        assert_eq!(seen.own.len(), 2, "{:?}", seen.own.keys());
        // Only the one KubeVirt is taking is in flight (not the one waiting for a VM).
        assert_eq!(seen.in_flight, 1);
        // Every name is known with its uid, ours or not (a name held is never asked for).
        assert_eq!(seen.uids.len(), list.len());
        assert_eq!(
            seen.uids
                .get(&("ns".to_owned(), "db-209901010000".to_owned())),
            Some(&"uid-db-209901010000".to_owned())
        );
    }
}
