//! The gate: one Machine's restart let go or held back, over the state it finds.

use super::*;

/// One Machine's restart through the gate, over the state it finds: (row, state, restart
/// wanted, its VMI now, what the restart becomes, shown reason, Event, in line after, holding a
/// slot after).
#[test]
fn the_gate_lets_a_restart_go_or_holds_it_and_its_status_keeps_what_was_last_acted_on() {
    use crate::reconciler::decide::restart::Cause;
    let k = key("a", "m");
    let status = MachineStatus {
        last_restart: Some("earlier".into()),
        last_restart_generation: Some(1),
        ..MachineStatus::default()
    };
    let wanted = Restart {
        delete_vmi: Some(("m".into(), "old-m".into(), Cause::PendingChange(2))),
        last_restart: None,
        last_restart_generation: Some(2),
    };
    let held = Restart {
        delete_vmi: None,
        last_restart: Some("earlier".into()),
        last_restart_generation: Some(1),
    };
    let new_vmi = Vmi {
        uid: "new-m".into(),
        running: true,
        deleting: false,
    };
    let full = state(&[("b", "x", 0)], &[]);
    let waiting = state(&[("b", "x", 0)], &[("a", "m", 1)]);
    let mine = state(&[("a", "m", 0)], &[]);
    let rows = [
        (
            "a slot free",
            state(&[], &[]),
            &wanted,
            None,
            &wanted,
            Some(RESTARTING),
            false,
            false,
            true,
        ),
        (
            "the budget spent",
            full.clone(),
            &wanted,
            None,
            &held,
            Some(RESTART_PENDING),
            true,
            true,
            false,
        ),
        (
            "still waiting",
            waiting.clone(),
            &wanted,
            None,
            &held,
            Some(RESTART_PENDING),
            false,
            true,
            false,
        ),
        (
            "no longer wanted",
            waiting,
            &Restart::default(),
            None,
            &Restart::default(),
            None,
            false,
            false,
            false,
        ),
        (
            "holding its slot",
            mine.clone(),
            &Restart::default(),
            None,
            &Restart::default(),
            Some(RESTARTING),
            false,
            false,
            true,
        ),
        (
            "its new VMI runs",
            mine,
            &Restart::default(),
            Some(&new_vmi),
            &Restart::default(),
            None,
            false,
            false,
            false,
        ),
    ];
    for (row, mut s, restart, vmi, want, shown, event, queued, slot) in rows {
        let mut restart = restart.clone();
        let gate = decide_restart(
            &mut s,
            &k,
            (vmi, Some(&status)),
            &mut restart,
            at(2),
            &limits(1, 0),
        );
        assert_eq!(restart, *want, "{row}: the restart");
        assert_eq!(gate.shown.as_ref().map(|s| s.reason), shown, "{row}: shown");
        assert_eq!(
            gate.recheck_in,
            shown.map(|_| RECHECK),
            "{row}: looked at again"
        );
        assert_eq!(gate.started_waiting.is_some(), event, "{row}: the Event");
        assert_eq!(s.queue.contains_key(&k), queued, "{row}: in line");
        assert_eq!(s.restarting.contains_key(&k), slot, "{row}: a slot");
    }
}
