//! Which Machines a new leader reconciles first. Its first pass reconciles every Machine once
//! (the list triggers each), 10,000 of them in over a minute; a Machine changed while no replica
//! led (or just before) must not wait behind thousands that are converged. So a Machine whose
//! spec no reconcile has answered yet, one being deleted, or one without a status is taken at
//! once; the rest of the list is handed to the Controller at the pace its workers take it.

use crate::reconciler::store::packed::MachineBrief;

/// When a listed Machine is handed to the Controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// At once, ahead of the converged ones.
    Now,
    /// Paced: only as reconciles finish, so the Controller's queue stays short and a Machine
    /// taken `Now` (or changed meanwhile) finds few ahead of it.
    Paced,
}

/// What the list tells of a Machine that decides its turn.
#[derive(Clone, Copy, Debug)]
pub struct Listed<'a> {
    pub brief: &'a MachineBrief,
    pub deleting: bool,
}

/// The turn of a Machine in a (re)list. A change seen on the watch after the list is not
/// decided here: it is always taken at once.
pub fn turn(m: Listed) -> Turn {
    let answered = m.brief.phase.is_some() && !m.brief.spec_ahead;
    if m.deleting || !answered {
        Turn::Now
    } else {
        Turn::Paced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_deleting_and_new_machines_come_first() {
        let brief = |phase: Option<&str>, spec_ahead| MachineBrief {
            phase: phase.map(Into::into),
            spec_ahead,
            ..MachineBrief::default()
        };
        // (phase, spec ahead of the status, deleting) -> turn
        let cases = [
            (Some("Running"), false, false, Turn::Paced, "converged"),
            (
                Some("Failed"),
                false,
                false,
                Turn::Paced,
                "failed, nothing new to answer",
            ),
            (
                Some("Running"),
                true,
                false,
                Turn::Now,
                "spec changed since the status",
            ),
            (
                None,
                false,
                false,
                Turn::Now,
                "never reconciled (no status)",
            ),
            (None, true, false, Turn::Now, "new"),
            (Some("Running"), false, true, Turn::Now, "being deleted"),
            (
                Some("Stopped"),
                true,
                true,
                Turn::Now,
                "changed and being deleted",
            ),
        ];
        for (phase, ahead, deleting, want, why) in cases {
            let b = brief(phase, ahead);
            assert_eq!(
                turn(Listed {
                    brief: &b,
                    deleting
                }),
                want,
                "{why}"
            );
        }
    }
}
