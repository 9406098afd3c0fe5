//! The steps after KubeVirt restored the disks: adopting the restored claims, starting again.

use std::collections::BTreeMap;

use super::{Seen, Step, phase, restored_claim, restored_disks};
use crate::api::names::pvc_name;

/// Where one disk stands during `Adopting`.
enum Swap<'a> {
    /// Still the claim or DataVolume recorded when adopting began.
    Old { uid: &'a str, ours: bool },
    /// Made again (the Machine's, another uid).
    Made,
    /// Not the Machine's: never touched.
    Foreign,
    /// Deleted, not made again yet.
    Gone,
}

pub(super) fn adopting(s: &Seen, machine_name: &str, restore_uid: &str) -> Step {
    let Some(machine) = &s.machine else {
        return Step::Fail(format!("Machine {machine_name} is gone"));
    };
    let previous: BTreeMap<&str, &str> = s
        .restore
        .and_then(|r| r.status.as_ref())
        .into_iter()
        .flat_map(|st| &st.disks)
        .filter_map(|d| Some((d.name.as_str(), d.previous_uid.as_deref()?)))
        .collect();
    let disks: Vec<(&str, bool)> = (machine.disks.iter().map(|d| (d.as_str(), false)))
        .chain(machine.sourced.iter().map(|d| (d.as_str(), true)))
        .collect();
    let state = |d: &str, data_volume: bool| {
        let live = if data_volume {
            &s.data_volumes
        } else {
            &s.claims
        };
        match live.get(&pvc_name(machine_name, d)) {
            Some(c) if previous.get(d) == Some(&c.uid.as_str()) => Swap::Old {
                uid: &c.uid,
                ours: c.ours,
            },
            Some(c) if c.ours => Swap::Made,
            Some(_) => Swap::Foreign,
            None => Swap::Gone,
        }
    };
    let restored = |d: &str| {
        s.claims
            .contains_key(&restored_claim(machine_name, d, restore_uid))
    };
    let untouched = disks
        .iter()
        .all(|(d, dv)| matches!(state(d, *dv), Swap::Old { .. }));
    let (mut lost, mut kept) = (Vec::new(), Vec::new());
    for &(d, data_volume) in &disks {
        let name = pvc_name(machine_name, d);
        let what = if data_volume { "DataVolume" } else { "claim" };
        match state(d, data_volume) {
            Swap::Made => {}
            Swap::Foreign | Swap::Old { ours: false, .. } => {
                return Step::Fail(format!("{what} {name} is not the Machine's"));
            }
            // Nothing deleted yet: the Machine keeps every disk as it was.
            Swap::Old { .. } if !restored(d) && untouched => {
                let gone = restored_claim(machine_name, d, restore_uid);
                return Step::Fail(format!(
                    "the restored claim {gone} is gone: the Machine keeps its disks as they were"
                ));
            }
            // Other disks are restored already; this one keeps its data from before.
            Swap::Old { .. } if !restored(d) => kept.push(d),
            Swap::Old { uid, .. } if data_volume => {
                return Step::DeleteDataVolume {
                    name,
                    uid: uid.to_owned(),
                };
            }
            Swap::Old { uid, .. } => {
                return Step::DeleteClaim {
                    name,
                    uid: uid.to_owned(),
                };
            }
            Swap::Gone if !restored(d) => lost.push(d),
            // CDI's claim of the deleted DataVolume goes with it (the garbage collector): a
            // DataVolume made while it is there would find a claim of its name it did not make.
            Swap::Gone if data_volume && s.claims.contains_key(&name) => {
                return Step::Wait {
                    phase: phase::ADOPTING,
                    why: Some(format!(
                        "waiting for the claim {name} of the replaced DataVolume to be deleted"
                    )),
                };
            }
            Swap::Gone => {
                let from = restored_claim(machine_name, d, restore_uid);
                return if data_volume {
                    Step::CreateDataVolume { name, from }
                } else {
                    Step::CreateClaim { name, from }
                };
            }
        }
    }
    if !lost.is_empty() {
        // Failing would free the Machine, and the reconciler would make an empty disk where the
        // data was: the restore holds it, and says what is gone and how to go on.
        let snapshot = s.restore.map(|r| r.spec.snapshot_name.as_str());
        let restored: Vec<String> = (lost.iter())
            .map(|d| restored_claim(machine_name, d, restore_uid))
            .collect();
        return Step::Wait {
            phase: phase::ADOPTING,
            why: Some(format!(
                "data lost: the restored claim(s) {} of disk(s) {} are gone after the old disk(s) \
                 were deleted; nothing is made in their place while this restore holds Machine \
                 {machine_name}. Make the claim(s) again from MachineSnapshot {} to go on, or \
                 delete this MachineRestore to let the Machine make the disk(s) anew (empty, or \
                 imported again from their source)",
                restored.join(", "),
                lost.join(", "),
                snapshot.unwrap_or_default(),
            )),
        };
    }
    if !kept.is_empty() {
        return Step::Fail(format!(
            "the restored claim(s) of disk(s) {} are gone: they keep their data from before the \
             restore, the other disks are restored",
            kept.join(", ")
        ));
    }
    Step::Advance(phase::STARTING)
}

/// Done when the VM mounts every disk `<machine>-<disk>` again (a DataVolume of a disk with a
/// source there too) and runs, or not, as the Machine asks now (not as it ran before: the user
/// may have halted or started it meanwhile).
pub(super) fn starting(s: &Seen, machine_name: &str) -> Step {
    let Some(machine) = &s.machine else {
        return Step::Fail(format!("Machine {machine_name} is gone"));
    };
    let Some(vm) = &s.vm else {
        return Step::Wait {
            phase: phase::STARTING,
            why: Some("waiting for the VM".to_owned()),
        };
    };
    let mounted = restored_disks(machine).all(|d| vm.claims.contains(&pvc_name(machine_name, d)));
    let data_volumes =
        (machine.sourced.iter()).all(|d| s.data_volumes.contains_key(&pvc_name(machine_name, d)));
    if !mounted || !data_volumes {
        return Step::Wait {
            phase: phase::STARTING,
            why: Some("waiting for the VM to mount the Machine's disks again".to_owned()),
        };
    }
    if vm.runs != machine.wants_running {
        let how = if machine.wants_running {
            "start"
        } else {
            "halt"
        };
        return Step::Wait {
            phase: phase::STARTING,
            why: Some(format!("waiting for the VM to {how} as the Machine asks")),
        };
    }
    Step::Succeed
}
