//! The storage conditions: StorageReady from the claims and what provisioning reports, and
//! DisksRetained once the disks no longer reference the Machine.

use super::{Cond, Reconciled, condition, problem_condition, reason};

/// True once no claim or DataVolume of a disk carries an owner reference to the Machine (the
/// release step ran before the status): a failed release says which.
pub(super) fn disks_retained(r: &Reconciled) -> Cond {
    let t = condition::DISKS_RETAINED;
    problem_condition(r, t).unwrap_or_else(|| {
        let message = "no disk carries an owner reference to the Machine: deleting it, in any \
                       propagation, keeps them for a Machine of the same name";
        Cond::new(t, "True", reason::DISKS_RELEASED, message.to_owned())
    })
}

pub(super) fn storage_condition(r: &Reconciled) -> Cond {
    let t = condition::STORAGE_READY;
    if let Some(c) = problem_condition(r, t) {
        return c;
    }
    if let Some(v) = r.provisioning.filter(|v| !v.ready) {
        let mut c = Cond::new(t, "False", &v.reason, v.message.clone());
        c.waiting = v.waiting;
        return c;
    }
    let volumes = r.claims.len() + r.provisioning.map_or(0, |_| sourced_count(r));
    if volumes == 0 {
        return Cond::new(
            t,
            "True",
            reason::PVC_BOUND,
            "The Machine has no disks".into(),
        );
    }
    let unbound: Vec<String> = r
        .claims
        .iter()
        .filter_map(|(name, pvc)| {
            let phase = pvc
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref());
            match phase {
                Some("Bound") => None,
                Some(other) => Some(format!("{name} ({other})")),
                None if pvc.is_some() => Some(format!("{name} (Pending)")),
                None => Some(format!("{name} (not created)")),
            }
        })
        .collect();
    if unbound.is_empty() {
        Cond::new(
            t,
            "True",
            reason::PVC_BOUND,
            format!("All {volumes} PersistentVolumeClaims are bound"),
        )
    } else {
        Cond::new(
            t,
            "False",
            reason::PVC_PENDING,
            format!(
                "Waiting for PersistentVolumeClaims to bind: {}",
                unbound.join(", ")
            ),
        )
    }
}

/// The sourced volumes among `status.disks[]` (the blank disks are `claims`).
fn sourced_count(r: &Reconciled) -> usize {
    r.disks.len().saturating_sub(r.claims.len())
}
