//! `Restoring`: shown while a MachineRestore holds the Machine's VM and disks.

use super::{Cond, condition, reason};

pub fn condition(name: &str, step: &str) -> Cond {
    let message = format!(
        "MachineRestore {name} ({step}) replaces the disks: the VM and disks are left to it"
    );
    Cond::new(
        condition::RESTORING,
        "True",
        reason::RESTORE_IN_PROGRESS,
        message,
    )
}
