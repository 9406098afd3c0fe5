//! The steps after KubeVirt restored the disks: adopting the restored claims, starting again.

use std::collections::BTreeMap;

use super::binder;
use super::proof::{self, KUBEVIRT_RESTORE_ANNOTATION, Unproven};
use super::{Seen, Step, phase, restored_claim, restored_disks};
use crate::api::names::pvc_name;
use crate::api::snapshots::RestoredDisk;

/// Where one disk stands during `Adopting`.
enum Swap<'a> {
    /// Still the claim or DataVolume recorded when adopting began.
    Old { uid: &'a str, ours: bool },
    /// The one this restore made again (its uid recorded); whether it is bound (a DataVolume:
    /// succeeded).
    Made { bound: bool },
    /// Anything else under the name: never touched, never taken for the disk.
    Foreign,
    /// Deleted, not made again yet.
    Gone,
}

/// Each old disk is deleted only once its restored claim is proven, and made again under its
/// name; past the first deletion (the commit point) nothing fails: what stands in the way holds
/// the Machine with `data lost:` or `data at risk:` and how to go on.
pub(super) fn adopting(s: &Seen, machine_name: &str, restore_uid: &str) -> Step {
    let recorded: BTreeMap<&str, &RestoredDisk> = (s.restore.and_then(|r| r.status.as_ref()))
        .into_iter()
        .flat_map(|st| &st.disks)
        .map(|d| (d.name.as_str(), d))
        .collect();
    let Some(machine) = &s.machine else {
        return at_risk(format!(
            "Machine {machine_name} is gone or made again mid-restore; the restored data is in \
             the claims {}",
            (recorded.values().map(|d| d.restored_claim.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    let disks: Vec<(&str, bool)> = (machine.disks.iter().map(|d| (d.as_str(), false)))
        .chain(machine.sourced.iter().map(|d| (d.as_str(), true)))
        .collect();
    let state = |d: &str, data_volume: bool| {
        let live = if data_volume {
            &s.data_volumes
        } else {
            &s.claims
        };
        let disk = recorded.get(d);
        match live.get(&pvc_name(machine_name, d)) {
            Some(c) if disk.and_then(|r| r.previous_uid.as_ref()) == Some(&c.uid) => Swap::Old {
                uid: &c.uid,
                ours: c.ours,
            },
            Some(c) if disk.and_then(|r| r.made_uid.as_ref()) == Some(&c.uid) => {
                Swap::Made { bound: c.bound }
            }
            Some(_) => Swap::Foreign,
            None => Swap::Gone,
        }
    };
    let proof = |d: &str| proof::check(s, d, &restored_claim(machine_name, d, restore_uid));
    let untouched = disks
        .iter()
        .all(|(d, dv)| matches!(state(d, *dv), Swap::Old { .. }));
    let (mut lost, mut kept, mut unbound) = (Vec::new(), Vec::new(), Vec::new());
    for &(d, data_volume) in &disks {
        let name = pvc_name(machine_name, d);
        let what = if data_volume { "DataVolume" } else { "claim" };
        let from = restored_claim(machine_name, d, restore_uid);
        match state(d, data_volume) {
            Swap::Made { bound: true } => {}
            Swap::Made { bound: false } => unbound.push(name),
            // Nothing deleted yet: the Machine keeps every disk as it was.
            Swap::Foreign | Swap::Old { ours: false, .. } if untouched => {
                return Step::Fail(format!("{what} {name} is not the Machine's"));
            }
            Swap::Foreign | Swap::Old { ours: false, .. } => {
                return at_risk(format!(
                    "{what} {name} is not one this restore made, and is left alone; delete it to \
                     let the restore make {name} again from the restored claim {from}"
                ));
            }
            Swap::Old { uid, .. } => match proof(d) {
                Err(why) if untouched => {
                    let why = match why {
                        Unproven::Missing => format!("the restored claim {from} is gone"),
                        Unproven::Foreign(why) | Unproven::Unbound(why) => why,
                    };
                    return Step::Fail(format!("{why}: the Machine keeps its disks as they were"));
                }
                // Other disks are restored already; this one keeps its data from before.
                Err(_) => kept.push(d),
                Ok(()) => {
                    let uid = uid.to_owned();
                    return if data_volume {
                        Step::DeleteDataVolume { name, uid }
                    } else {
                        Step::DeleteClaim { name, uid }
                    };
                }
            },
            Swap::Gone => match proof(d) {
                Err(Unproven::Missing) => lost.push(d),
                Err(Unproven::Foreign(why) | Unproven::Unbound(why)) => {
                    return at_risk(format!(
                        "{why}; nothing is made under {name} from it while this restore holds \
                         Machine {machine_name}"
                    ));
                }
                // CDI's claim of the deleted DataVolume goes with it (the garbage collector): a
                // DataVolume made while it is there would find a claim of its name it did not
                // make.
                Ok(()) if data_volume && s.claims.contains_key(&name) => {
                    return Step::Wait {
                        phase: phase::ADOPTING,
                        why: Some(format!(
                            "waiting for the claim {name} of the replaced DataVolume to be deleted"
                        )),
                    };
                }
                Ok(()) if data_volume => return Step::CreateDataVolume { name, from },
                Ok(()) => return Step::CreateClaim { name, from },
            },
        }
    }
    if !lost.is_empty() {
        return lost_claims(s, machine_name, restore_uid, &lost);
    }
    if !kept.is_empty() {
        return Step::Fail(format!(
            "the restored claim(s) of disk(s) {} are gone: they keep their data from before the \
             restore, the other disks are restored",
            kept.join(", ")
        ));
    }
    // The VM starts on disks the storage bound (a DataVolume: CDI succeeded).
    let waiting = format!("waiting for {} to bind", unbound.join(", "));
    if let Some(step) = binder::bind(s, &unbound, phase::ADOPTING, waiting) {
        return step;
    }
    Step::Advance(phase::STARTING)
}

/// Past the commit point: the restore waits, holding the Machine, and says why.
fn at_risk(why: String) -> Step {
    Step::Wait {
        phase: phase::ADOPTING,
        why: Some(format!("data at risk: {why}")),
    }
}

/// Failing would free the Machine, and the reconciler would make an empty disk where the data
/// was: the restore holds it, and says what is gone and how to go on.
fn lost_claims(s: &Seen, machine_name: &str, restore_uid: &str, lost: &[&str]) -> Step {
    let r = s.restore;
    let snapshot = r.map(|r| r.spec.snapshot_name.as_str());
    let restored: Vec<String> = (lost.iter())
        .map(|d| restored_claim(machine_name, d, restore_uid))
        .collect();
    Step::Wait {
        phase: phase::ADOPTING,
        why: Some(format!(
            "data lost: the restored claim(s) {} of disk(s) {} are gone after the old disk(s) \
             were deleted; nothing is made in their place while this restore holds Machine \
             {machine_name}. Make the claim(s) again from MachineSnapshot {} (annotated \
             {KUBEVIRT_RESTORE_ANNOTATION}: {}, controlled by the VM) to go on",
            restored.join(", "),
            lost.join(", "),
            snapshot.unwrap_or_default(),
            r.and_then(|r| r.metadata.name.as_deref())
                .unwrap_or_default(),
        )),
    }
}

/// Done when the VM mounts every disk `<machine>-<disk>` again (a DataVolume of a disk with a
/// source there too) and runs, or not, as the Machine asks now (not as it ran before: the user
/// may have halted or started it meanwhile).
pub(super) fn starting(s: &Seen, machine_name: &str) -> Step {
    // Every disk is back: a Machine deleted meanwhile has nothing left to start.
    let Some(machine) = s.machine.as_ref().filter(|m| !m.deleting) else {
        return Step::Succeed;
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
