//! Kubernetes Events for what a user should know: a problem they can fix (once, when it appears),
//! the VM being created, the Machine starting to run or stopping, and disks hot-plugged (or
//! waiting for a restart instead).

use kube::runtime::events::{Event, Recorder, Reporter};

use crate::reconciler::decide::eviction::EVICTION_REQUESTED;
use crate::reconciler::decide::notices::Notice;
use kube::{Resource, ResourceExt};

use crate::api::{Machine, MachineStatus};
use crate::telemetry::metrics::{Eviction, Metrics};

/// The API server refuses Event notes over 1 KiB; longer messages are cut (at a character
/// boundary) and marked, so a long problem is still announced.
pub const MAX_NOTE: usize = 1024;
const ELLIPSIS: &str = "…";

pub fn truncate_note(note: &str) -> String {
    if note.len() <= MAX_NOTE {
        return note.to_owned();
    }
    let mut end = MAX_NOTE - ELLIPSIS.len();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ELLIPSIS}", &note[..end])
}

/// Where Events go: a client (its own rate limiter) and who reports them.
#[derive(Clone)]
pub struct Publisher {
    pub client: kube::Client,
    pub reporter: Reporter,
}

/// Publishes `notices` on the Machine. A failure to publish is logged, never fatal.
pub async fn publish(publisher: &Publisher, machine: &Machine, notices: Vec<Notice>) {
    let reference = machine.object_ref(&());
    for n in notices {
        // A Recorder per Event: kube's keeps every Event it published for six minutes, to
        // count repeats as a series (a patch). Ours are published once per status change, so
        // that cache held nothing useful and grew with the Machines (13 MB at 10,000), and
        // Events are only ever created (RBAC: `create` only).
        let recorder = Recorder::new(publisher.client.clone(), publisher.reporter.clone());
        let event = Event {
            type_: n.type_,
            reason: n.reason,
            note: Some(truncate_note(&n.note)),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&event, &reference).await {
            tracing::warn!(
                machine = %machine.name_any(),
                namespace = machine.namespace().unwrap_or_default(),
                error = %e,
                "could not publish event"
            );
        }
    }
}

/// Announces a status write: counts the drains it shows (in `metrics`), and publishes
/// `notices`.
pub fn announce_status(
    (publisher, metrics): (&Publisher, &Metrics),
    machine: &Machine,
    new: &MachineStatus,
    notices: Vec<Notice>,
) {
    record_evictions(metrics, new, &notices);
    announce(publisher, machine, notices);
}

/// Publishes `notices` on the Machine in the background: an Event never holds up the next
/// Machine.
pub fn announce(publisher: &Publisher, machine: &Machine, notices: Vec<Notice>) {
    if notices.is_empty() {
        return;
    }
    let (publisher, machine) = (publisher.clone(), machine.clone());
    let span = tracing::Span::current();
    tokio::spawn(tracing::Instrument::instrument(
        async move { publish(&publisher, &machine, notices).await },
        span,
    ));
}

/// Counts a drain reaching the VM once, when `EvictionRequested` appears (its Warning Event).
fn record_evictions(metrics: &Metrics, new: &MachineStatus, notices: &[Notice]) {
    let drained = (new.conditions.iter())
        .filter(|c| c.type_ == EVICTION_REQUESTED && c.status == "True")
        .filter(|c| notices.iter().any(|n| n.reason == c.reason));
    for c in drained {
        let label = Eviction {
            reason: c.reason.clone(),
        };
        metrics.eviction_requests.get_or_create(&label).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_notes_are_cut_under_the_api_limit() {
        assert_eq!(truncate_note("short"), "short");
        let exact = "x".repeat(MAX_NOTE);
        assert_eq!(truncate_note(&exact), exact);
        // Multi-byte characters straddling the limit are not split.
        let long = "é".repeat(MAX_NOTE);
        let cut = truncate_note(&long);
        assert!(cut.len() <= MAX_NOTE, "{}", cut.len());
        assert!(cut.ends_with(ELLIPSIS) && cut.starts_with("éé"));
    }
}
