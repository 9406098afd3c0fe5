//! The restart budget's state (see `decide::restart_budget` for the rule): one per process,
//! shared by every watch scope, so the limits hold cluster-wide. Only the leader reconciles, so
//! only the leader's copy counts; each leader term starts empty and is rebuilt, at its first use,
//! from the `RestartPending` conditions the Machines show (see [`rebuild`]).

use std::sync::{Mutex, MutexGuard};

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::Machine;
use crate::reconciler::decide::restart::Restart;
use crate::reconciler::decide::restart_budget::{
    self as rule, Gate, Key, Limits, RESTART_PENDING, RESTARTING, State, Vmi, rebuild,
};
use crate::reconciler::store::packed::Packed;
use crate::telemetry::Metrics;
use crate::telemetry::metrics::RestartBudget as Label;

pub struct RestartBudget {
    pub limits: Limits,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    state: State,
    /// The Machine caches of this leader term's scopes.
    machines: Vec<Store<Packed<Machine>>>,
    rebuilt: bool,
}

impl RestartBudget {
    pub fn new(limits: Limits) -> Self {
        RestartBudget {
            limits,
            inner: Mutex::default(),
        }
    }

    /// A new leader term: what an earlier term held is forgotten, and rebuilt from these caches
    /// at the first restart decision (when they are filled).
    pub fn start_term(&self, machines: Vec<Store<Packed<Machine>>>) {
        *self.lock() = Inner {
            machines,
            ..Inner::default()
        };
    }

    /// A poisoned lock still holds a consistent map (every change is one call).
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The budget's say on `restart` (see [`rule::decide_restart`]), with the state shared by every
    /// Machine: rebuilt at the term's first use, the gone Machines' slots freed first.
    pub fn gate(
        &self,
        metrics: &Metrics,
        machine: &Machine,
        vmi: Option<&Vmi>,
        restart: &mut Restart,
        now: Timestamp,
    ) -> Gate {
        let key: Key = (machine.namespace().unwrap_or_default(), machine.name_any());
        let mut inner = self.lock();
        let inner = &mut *inner;
        if !inner.rebuilt {
            inner.state = rebuild_from(&inner.machines);
            inner.rebuilt = true;
        }
        let state = &mut inner.state;
        forget_gone(state, &inner.machines);
        let seen = (vmi, machine.status.as_ref());
        let gate = rule::decide_restart(state, &key, seen, restart, now, &self.limits);
        count(metrics, state);
        gate
    }
}

/// A new leader's budget, from the `RestartPending` conditions of the Machines the `machines`
/// caches hold (public for `tests/memory_peaks.rs`).
pub fn rebuild_from(machines: &[Store<Packed<Machine>>]) -> State {
    // One Machine decoded at a time, and dropped before the next: decoding them all first held
    // every Machine at once (some 55 MB at 10,000) at a new leader's busiest moment, the peak
    // of the operator's heap.
    let conditions = (machines.iter()).flat_map(|s| s.state()).filter_map(|p| {
        let m = p.unpack().ok()?;
        let key = (m.namespace().unwrap_or_default(), m.name_any());
        Some((key, m.status.map(|s| s.conditions).unwrap_or_default()))
    });
    let state = rebuild(conditions);
    if !state.queue.is_empty() || !state.restarting.is_empty() {
        tracing::info!(
            restarting = state.restarting.len(),
            waiting = state.queue.len(),
            "restart budget rebuilt from the Machines' {RESTART_PENDING} conditions"
        );
    }
    state
}

/// Machines no longer in any cache (deleted) give up their slot and place.
fn forget_gone(state: &mut State, machines: &[Store<Packed<Machine>>]) {
    if machines.is_empty() {
        return;
    }
    let present = |(ns, name): &Key| {
        let r = ObjectRef::new(name).within(ns);
        machines.iter().any(|s| s.get(&r).is_some())
    };
    let gone: Vec<Key> = (state.restarting.keys())
        .chain(state.queue.keys())
        .filter(|k| !present(k))
        .cloned()
        .collect();
    for k in gone {
        state.forget(&k);
    }
}

fn count(metrics: &Metrics, state: &State) {
    for (reason, n) in [
        (RESTARTING, state.restarting.len()),
        (RESTART_PENDING, state.queue.len()),
    ] {
        let label = Label {
            reason: reason.to_owned(),
        };
        metrics
            .restarts
            .get_or_create(&label)
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::reconciler::decide::restart::Cause;
    use crate::reconciler::decide::restart_budget::RECHECK;
    use kube::runtime::reflector::{self, store::Writer};
    use kube::runtime::watcher;

    fn machine(name: &str) -> Machine {
        let spec = serde_json::from_value(serde_json::json!({})).expect("spec");
        let mut m = Machine::new(name, spec);
        m.metadata.namespace = Some("ns".into());
        m
    }

    fn wanted(vmi_uid: &str) -> Restart {
        Restart {
            delete_vmi: Some(("vmi".into(), vmi_uid.into(), Cause::PendingChange(2))),
            last_restart: None,
            last_restart_generation: Some(2),
        }
    }

    fn running(uid: &str) -> Vmi {
        Vmi {
            uid: uid.to_owned(),
            running: true,
            deleting: false,
        }
    }

    fn gauges(metrics: &Metrics) -> (bool, bool) {
        let text = metrics.encode();
        (
            text.contains("kubevirt_operator_restarts{reason=\"Restarting\"} 1"),
            text.contains("kubevirt_operator_restarts{reason=\"RestartPending\"} 1"),
        )
    }

    fn apply(w: &mut Writer<Packed<Machine>>, m: &Machine) {
        let packed = Packed::pack(m).expect("pack");
        w.apply_watcher_event(&watcher::Event::Apply(packed));
    }

    #[test]
    fn a_held_restart_deletes_and_records_nothing_and_a_freed_slot_goes_to_the_next() {
        let limits = Limits {
            global: 1,
            per_namespace: 0,
            timeout: Duration::from_secs(600),
        };
        let budget = RestartBudget::new(limits);
        let (store, mut writer) = reflector::store();
        let (a, b) = (machine("a"), machine("b"));
        apply(&mut writer, &a);
        apply(&mut writer, &b);
        budget.start_term(vec![store]);
        let metrics = Metrics::new();
        let now = Timestamp::now();

        let mut first = wanted("a-old");
        let gate = budget.gate(&metrics, &a, None, &mut first, now);
        assert!(first.delete_vmi.is_some(), "a goes");
        assert_eq!(gate.shown.map(|s| s.reason), Some(RESTARTING));

        let mut second = wanted("b-old");
        let gate = budget.gate(&metrics, &b, None, &mut second, now);
        assert_eq!(
            second,
            Restart::default(),
            "held: nothing deleted or recorded"
        );
        assert_eq!(gate.shown.map(|s| s.reason), Some(RESTART_PENDING));
        assert!(gate.started_waiting.is_some(), "the Event, once");
        assert_eq!(gate.recheck_in, Some(RECHECK));
        assert_eq!(gauges(&metrics), (true, true));
        let gate = budget.gate(&metrics, &b, None, &mut wanted("b-old"), now);
        assert!(gate.started_waiting.is_none(), "no second Event");

        // a's new VMI runs: its slot frees, and b takes it.
        let gate = budget.gate(
            &metrics,
            &a,
            Some(&running("a-new")),
            &mut Restart::default(),
            now,
        );
        assert_eq!(gate.shown, None);
        let mut again = wanted("b-old");
        budget.gate(&metrics, &b, None, &mut again, now);
        assert!(again.delete_vmi.is_some(), "b goes");

        // b deleted: its slot is freed for others.
        writer.apply_watcher_event(&watcher::Event::Delete(Packed::pack(&b).expect("pack")));
        let mut third = wanted("a-newer");
        budget.gate(&metrics, &a, Some(&running("a-new")), &mut third, now);
        assert!(third.delete_vmi.is_some(), "b's slot freed");
    }
}
