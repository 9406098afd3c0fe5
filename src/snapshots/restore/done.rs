//! A restore that ended: its restored claims deleted once it succeeded (unless kept), then its
//! finalizer removed.

use super::{Seen, Step, phase};
use crate::api::snapshots::RESTORE_FINALIZER;

/// Whether `r` still needs its finalizer put on: not ended, not being deleted, without it.
pub fn needs_finalizer(r: &crate::api::snapshots::MachineRestore) -> bool {
    let current = r.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(current, Some(phase::SUCCEEDED | phase::FAILED))
        && r.metadata.deletion_timestamp.is_none()
        && !has_finalizer(r)
}

fn has_finalizer(r: &crate::api::snapshots::MachineRestore) -> bool {
    (r.metadata.finalizers.iter().flatten()).any(|f| f == RESTORE_FINALIZER)
}

/// Ended in `current`: a succeeded restore deletes each restored claim it recorded (by the uid
/// it had when adopting began: never a claim planted under the name later), unless it keeps
/// them; then the finalizer goes. A failed one keeps them (for a look at what KubeVirt made).
pub(super) fn done(s: &Seen, current: &str) -> Step {
    let Some(r) = s.restore else {
        return Step::Wait {
            phase: phase::PENDING,
            why: None,
        };
    };
    let ended = if current == phase::SUCCEEDED {
        phase::SUCCEEDED
    } else {
        phase::FAILED
    };
    if ended == phase::SUCCEEDED && !r.spec.keep_restored_claims {
        let disks = r.status.iter().flat_map(|st| &st.disks);
        for d in disks {
            let live = s.claims.get(&d.restored_claim);
            if let Some(c) = live.filter(|c| Some(&c.uid) == d.restored_uid.as_ref()) {
                return Step::DeleteClaim {
                    name: d.restored_claim.clone(),
                    uid: c.uid.clone(),
                };
            }
        }
    }
    // A consumer Pod left by a step that failed would keep the disks attached.
    if let Some(b) = s.binder.as_ref().filter(|b| b.ours && !b.deleting) {
        return Step::Unbind(b.uid.clone());
    }
    if has_finalizer(r) {
        return Step::Release;
    }
    Step::Wait {
        phase: ended,
        why: r.status.as_ref().and_then(|st| st.error.clone()),
    }
}
