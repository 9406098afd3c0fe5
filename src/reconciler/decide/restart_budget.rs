//! The restart budget (pure): restarts the operator performs (`restarted-at`, pending changes
//! under `updateStrategy: Restart`, `--external-eviction restart`) are rationed to `global` at
//! once cluster-wide and `per_namespace` at once in one namespace (0: no limit). The rest wait
//! in order of when each was found due, showing `RestartPending`.
//!
//! A restart holds its slot from the VMI's deletion until a new VMI of the Machine is
//! `Running`, or for `timeout` at most (a VM that never comes back must not hold the fleet).
//!
//! The state lives in the leader's memory (`run::restart_budget`); the condition makes it
//! observable, so a new leader rebuilds it with [`rebuild`]: `RestartPending=True` is a place in
//! the queue (since its `lastTransitionTime`), `RestartPending=False`, reason `Restarting`, a slot
//! held (since its `lastTransitionTime`, over once a VMI not being deleted runs).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;

use super::restart::Restart;
use crate::api::MachineStatus;
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;

/// How soon a waiting or restarting Machine is looked at again (besides its watches): when a
/// slot frees, the first in line takes it within this.
pub const RECHECK: Duration = Duration::from_secs(3);

/// The condition type, the reason of a waiting Machine, its Event and the metric's label.
pub const RESTART_PENDING: &str = "RestartPending";
/// The condition's reason (and the metric's label) while a restart holds a slot.
pub const RESTARTING: &str = "Restarting";

/// The budget's settings (`--max-concurrent-restarts`, `--max-concurrent-restarts-per-namespace`,
/// `--restart-timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Restarts at once cluster-wide; 0: no limit.
    pub global: u32,
    /// Restarts at once in one namespace; 0: no limit.
    pub per_namespace: u32,
    /// How long a restart holds its slot at most; zero: until its VMI runs.
    pub timeout: Duration,
}

/// A Machine: (namespace, name).
pub type Key = (String, String);

/// A restart holding a slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    pub since: Timestamp,
    /// The VMI deleted (unknown for a slot rebuilt from the condition).
    pub vmi_uid: Option<String>,
}

/// Which Machines are restarting, and which wait (since when each was found due).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    pub restarting: BTreeMap<Key, Slot>,
    pub queue: BTreeMap<Key, Timestamp>,
}

/// May this Machine restart now?
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Go,
    /// At `position` (1-based) of `queued` in line; the message says it with the budget.
    Wait {
        position: usize,
        queued: usize,
        message: String,
    },
}

/// The VMI as the budget sees it: whether a restart is over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vmi {
    pub uid: String,
    pub running: bool,
    /// Being deleted (KubeVirt keeps a VMI while its guest shuts down).
    pub deleting: bool,
}

impl Vmi {
    /// How the budget sees `vmi` (one without a uid was never stored: nothing).
    pub fn of(vmi: &VirtualMachineInstance) -> Option<Vmi> {
        Some(Vmi {
            uid: vmi.metadata.uid.clone()?,
            running: (vmi.status.as_ref()).and_then(|s| s.phase.as_deref()) == Some("Running"),
            deleting: vmi.metadata.deletion_timestamp.is_some(),
        })
    }
}

/// What the budget made of one reconcile's restart.
#[derive(Debug, Default, PartialEq)]
pub struct Gate {
    /// `RestartPending` to show.
    pub shown: Option<Shown>,
    /// Run again then (waiting, or holding a slot).
    pub recheck_in: Option<Duration>,
    /// Set when the Machine has just started waiting: the Event's note.
    pub started_waiting: Option<String>,
}

/// The budget's say on the restart of Machine `key` (its VM's VMI `vmi`, its `status`): it goes
/// ahead and takes a slot, or is held back while the budget is spent (then `restart` deletes and
/// records nothing, so it is asked again); the Machine's slot is freed once its new VMI runs, and
/// its place in line once no restart is wanted.
pub fn decide_restart(
    state: &mut State,
    key: &Key,
    (vmi, status): (Option<&Vmi>, Option<&MachineStatus>),
    restart: &mut Restart,
    now: Timestamp,
    limits: &Limits,
) -> Gate {
    state.expire(limits, now);
    state.finish(key, vmi);
    let mut gate = Gate::default();
    let verdict = match &restart.delete_vmi {
        Some((_, uid, _)) => {
            let verdict = admit(state, key, now, limits);
            match &verdict {
                Verdict::Go => state.start(key, Some(uid.clone()), now),
                Verdict::Wait { message, .. } => {
                    if !state.queue.contains_key(key) {
                        gate.started_waiting = Some(message.clone());
                    }
                    state.queue.entry(key.clone()).or_insert(now);
                    hold(restart, status);
                }
            }
            Some(verdict)
        }
        // No longer wanted (done some other way, or the change undone): out of line.
        None => {
            state.queue.remove(key);
            None
        }
    };
    gate.shown = state.shown(key, verdict.as_ref(), limits);
    gate.recheck_in = gate.shown.as_ref().map(|_| RECHECK);
    gate
}

/// Nothing deleted, and what was last acted on stays recorded, so the restart is asked again.
fn hold(restart: &mut Restart, status: Option<&MachineStatus>) {
    restart.delete_vmi = None;
    restart.last_restart = status.and_then(|s| s.last_restart.clone());
    restart.last_restart_generation = status.and_then(|s| s.last_restart_generation);
}

/// What `RestartPending` shows: (status, reason, message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl State {
    /// Slots held for longer than the timeout are freed.
    pub fn expire(&mut self, limits: &Limits, now: Timestamp) {
        if limits.timeout.is_zero() {
            return;
        }
        self.restarting
            .retain(|_, s| elapsed(s.since, now).is_none_or(|e| e < limits.timeout));
    }

    /// A Machine gone (deleted, or no longer watched): its slot and place are freed.
    pub fn forget(&mut self, key: &Key) {
        self.restarting.remove(key);
        self.queue.remove(key);
    }

    /// A restart granted: the Machine leaves the queue and holds a slot.
    pub fn start(&mut self, key: &Key, vmi_uid: Option<String>, now: Timestamp) {
        self.queue.remove(key);
        let slot = Slot {
            since: now,
            vmi_uid,
        };
        self.restarting.entry(key.clone()).or_insert(slot);
    }

    /// Frees the Machine's slot once a new VMI of it runs; whether it did.
    pub fn finish(&mut self, key: &Key, vmi: Option<&Vmi>) -> bool {
        let done = (self.restarting.get(key)).is_some_and(|s| vmi.is_some_and(|v| over(s, v)));
        if done {
            self.restarting.remove(key);
        }
        done
    }

    /// What the Machine's `RestartPending` condition says, if anything.
    pub fn shown(&self, key: &Key, verdict: Option<&Verdict>, limits: &Limits) -> Option<Shown> {
        if let Some(Verdict::Wait { message, .. }) = verdict {
            return Some(Shown {
                status: "True",
                reason: RESTART_PENDING,
                message: message.clone(),
            });
        }
        let slot = self.restarting.get(key)?;
        let until = match limits.timeout.is_zero() {
            true => String::new(),
            false => format!(" (or for {}s at most)", limits.timeout.as_secs()),
        };
        Some(Shown {
            status: "False",
            reason: RESTARTING,
            message: format!(
                "restarting since {}: counts against the restart budget until the new VMI is Running{until}",
                slot.since
            ),
        })
    }
}

/// Whether the restart of `slot` is over: a VMI other than the one deleted runs. The slot is
/// taken (and the condition written) only after the deletion was accepted, so a VMI not being
/// deleted is the new one even where the deleted one's uid is unknown (a rebuilt slot).
fn over(slot: &Slot, v: &Vmi) -> bool {
    let other = slot.vmi_uid.as_deref() != Some(v.uid.as_str());
    v.running && !v.deleting && other
}

fn elapsed(since: Timestamp, now: Timestamp) -> Option<Duration> {
    Duration::try_from(now.duration_since(since)).ok()
}

fn fits(limit: u32, used: u32) -> bool {
    limit == 0 || used < limit
}

/// May `key` (in its namespace, due since `due`) restart now? The queue is served in order of
/// due time; one held back only by its namespace's limit lets later ones of other namespaces
/// by, and every Machine ahead that fits is counted as if it had started (its slot is kept for
/// it). Expired slots must have been freed ([`State::expire`]).
pub fn admit(state: &State, key: &Key, due: Timestamp, limits: &Limits) -> Verdict {
    if state.restarting.contains_key(key) {
        return Verdict::Go;
    }
    let mut global = state.restarting.len() as u32;
    let mut per_ns: BTreeMap<&str, u32> = BTreeMap::new();
    for (ns, _) in state.restarting.keys() {
        *per_ns.entry(ns).or_default() += 1;
    }
    let restarting = global;
    let mut line: Vec<(Timestamp, &Key)> = state.queue.iter().map(|(k, d)| (*d, k)).collect();
    let due = state.queue.get(key).copied().unwrap_or(due);
    if !state.queue.contains_key(key) {
        line.push((due, key));
    }
    line.sort();
    let queued = line.len();
    for (i, (_, k)) in line.into_iter().enumerate() {
        let used = per_ns.get(k.0.as_str()).copied().unwrap_or(0);
        let fit = fits(limits.global, global) && fits(limits.per_namespace, used);
        if k == key {
            if fit {
                return Verdict::Go;
            }
            let in_ns = state
                .restarting
                .keys()
                .filter(|(ns, _)| *ns == key.0)
                .count();
            return Verdict::Wait {
                position: i + 1,
                queued,
                message: format!(
                    "waiting for a restart slot: {} of {queued} in line; {} restarting of at most {} at once cluster-wide (--max-concurrent-restarts), {in_ns} in namespace {} of at most {} (--max-concurrent-restarts-per-namespace)",
                    i + 1,
                    restarting,
                    limit(limits.global),
                    key.0,
                    limit(limits.per_namespace),
                ),
            };
        }
        if fit {
            global += 1;
            *per_ns.entry(k.0.as_str()).or_default() += 1;
        }
    }
    Verdict::Go
}

fn limit(n: u32) -> String {
    match n {
        0 => "unlimited".to_owned(),
        n => n.to_string(),
    }
}

/// The state a new leader starts from: what the Machines' `RestartPending` conditions say,
/// each Machine's conditions taken as they come (its caller decodes one Machine at a time).
pub fn rebuild(machines: impl IntoIterator<Item = (Key, Vec<Condition>)>) -> State {
    let mut state = State::default();
    for (key, conditions) in machines {
        let Some(c) = conditions.iter().find(|c| c.type_ == RESTART_PENDING) else {
            continue;
        };
        let since = c.last_transition_time.0;
        match (c.status.as_str(), c.reason.as_str()) {
            ("True", _) => {
                state.queue.insert(key, since);
            }
            ("False", RESTARTING) => {
                let slot = Slot {
                    since,
                    vmi_uid: None,
                };
                state.restarting.insert(key, slot);
            }
            _ => {}
        }
    }
    state
}

#[cfg(test)]
mod tests;
