//! Claims of a `WaitForFirstConsumer` class bind only once a pod mounts them: KubeVirt calls a
//! restore complete with its restored claims unbound, and the clone of an unbound claim never
//! binds. Nothing is deleted for, nor started on, a claim the storage has not bound: the restore
//! makes one consumer Pod of its own, `<restore>-bind`, mounting every claim of the step that is
//! not bound (one Pod: the scheduler puts them all where one node reaches them, as the VM
//! needs), and deletes it once they are (why not a clone under a temporary name:
//! docs/reconciler.md, "Restores on WaitForFirstConsumer storage").

use super::{Seen, Step};

/// The consumer Pod of restore `restore`.
pub fn name(restore: &str) -> String {
    format!("{restore}-bind")
}

/// With `unbound` claims of the step not bound: make the Pod, or wait for the storage to bind
/// them (`waiting` says what for). Every claim bound: delete the Pod and wait until it is gone;
/// `None` once there is none (the step goes on).
pub fn bind(s: &Seen, unbound: &[String], phase: &'static str, waiting: String) -> Option<Step> {
    let wait = |why: String| Step::Wait {
        phase,
        why: Some(why),
    };
    match &s.binder {
        // Not this restore's: never touched, and nothing mounted through it.
        Some(b) if !b.ours => Some(wait(format!(
            "{waiting}; the Pod {} that would bind them is not this restore's: delete it",
            b.name
        ))),
        Some(b) if b.deleting => Some(wait(format!(
            "waiting for the Pod {} that bound the claims to go",
            b.name
        ))),
        Some(b) if unbound.is_empty() => Some(Step::Unbind(b.uid.clone())),
        Some(b) => Some(wait(format!("{waiting} (mounted by the Pod {})", b.name))),
        None if unbound.is_empty() => None,
        None => Some(Step::Bind(unbound.to_vec())),
    }
}
