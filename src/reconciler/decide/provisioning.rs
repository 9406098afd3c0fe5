//! What provisioning is doing, as pure functions of what was observed: CDI's DataVolume phases
//! and conditions become `status.disks[]`, the `StorageReady` verdict and Events; the VM's
//! `printableStatus` becomes `status.vmStatus`; KubeVirt's `RestartRequired` is mirrored.
//!
//! Reasons are the words users see in the condition, the Event and the metric label alike.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::api::MachineStatus;
use crate::api::source::{DiskSource, DiskStatus};

use super::problem::reason::PVC_PENDING;
use crate::reconciler::apis::cdi::{DataVolume, DataVolumeCondition, dv_phase};
use crate::reconciler::apis::kubevirt::VirtualMachine;

pub mod reason {
    /// Machines with sources when the DataVolume API is not served.
    pub const CDI_NOT_INSTALLED: &str = "CDINotInstalled";
    pub const IMPORT_FAILED: &str = "ImportFailed";
    pub const CLONE_FAILED: &str = "CloneFailed";
    pub const IMAGE_PULL_FAILED: &str = "ImagePullFailed";
    /// A clone's source PVC or DataSource does not exist.
    pub const SOURCE_NOT_FOUND: &str = "SourceNotFound";
    /// The DataVolume is not written or CDI has not picked it up yet.
    pub const DATA_VOLUME_PENDING: &str = "DataVolumePending";
    /// Every DataVolume succeeded (its claim populated) and its claim is bound.
    pub const DATA_VOLUMES_READY: &str = "DataVolumesReady";
    pub const IMPORT_STARTED: &str = "ImportStarted";
    pub const IMPORT_SUCCEEDED: &str = "ImportSucceeded";
    pub const CLONE_STARTED: &str = "CloneStarted";
    pub const CLONE_SUCCEEDED: &str = "CloneSucceeded";
    /// KubeVirt's condition type and reason, mirrored.
    pub const RESTART_REQUIRED: &str = "RestartRequired";
}

/// Container waiting reasons CDI copies onto its `Running` condition when the importer's image
/// cannot be pulled, and CDI's own word for it.
const PULL_FAILURES: &[&str] = &["ErrImagePull", "ImagePullBackOff", "ImagePullFailed"];
/// CDI's condition reason when a clone's source is missing.
const CLONE_WITHOUT_SOURCE: &str = "CloneWithoutSource";
/// CDI's `Running` condition reasons when its worker pod failed (CDI retries it).
const WORKER_FAILURES: &[&str] = &["Error", "CrashLoopBackOff"];

/// One disk or CD-ROM that has a source.
pub struct Sourced<'a> {
    /// `disk root` or `cdrom installer`, as messages name it.
    pub label: String,
    pub name: &'a str,
    pub claim_name: String,
    pub source: &'a DiskSource,
    pub data_volume: Option<&'a DataVolume>,
    pub claim: Option<&'a PersistentVolumeClaim>,
}

/// A `StorageReady` verdict about the DataVolumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub ready: bool,
    pub reason: String,
    pub message: String,
    /// False and only waiting for CDI (not something the user must fix).
    pub waiting: bool,
}

/// The verdict on every sourced volume; `None` when the Machine has none.
pub fn verdict(volumes: &[Sourced], cdi_installed: bool) -> Option<Verdict> {
    if volumes.is_empty() {
        return None;
    }
    if !cdi_installed {
        let names: Vec<&str> = volumes.iter().map(|v| v.label.as_str()).collect();
        return Some(failed(
            reason::CDI_NOT_INSTALLED,
            format!(
                "CDI (Containerized Data Importer) is not installed: the DataVolume API \
                 (cdi.kubevirt.io/v1beta1) is not served, and {} need it",
                names.join(", ")
            ),
        ));
    }
    let states: Vec<(State, &Sourced)> = volumes.iter().map(|v| (state(v), v)).collect();
    let pick = |f: fn(&State) -> bool| -> Option<Verdict> {
        let hits: Vec<&(State, &Sourced)> = states.iter().filter(|(s, _)| f(s)).collect();
        let (first, _) = hits.first()?;
        let message = hits
            .iter()
            .map(|(s, v)| format!("{}: {}", v.label, s.message()))
            .collect::<Vec<_>>()
            .join("; ");
        Some(Verdict {
            ready: false,
            reason: first.reason().to_owned(),
            message,
            waiting: matches!(first, State::Working { .. }),
        })
    };
    pick(|s| matches!(s, State::Failed { .. }))
        .or_else(|| pick(|s| matches!(s, State::Working { .. })))
        .or_else(|| {
            Some(Verdict {
                ready: true,
                reason: reason::DATA_VOLUMES_READY.to_owned(),
                message: format!(
                    "{} imported or cloned and bound",
                    states
                        .iter()
                        .map(|(_, v)| v.label.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                waiting: false,
            })
        })
}

fn failed(reason: &str, message: String) -> Verdict {
    Verdict {
        ready: false,
        reason: reason.to_owned(),
        message,
        waiting: false,
    }
}

#[derive(Debug, PartialEq)]
enum State {
    Ready,
    Working {
        reason: String,
        detail: String,
    },
    Failed {
        reason: &'static str,
        detail: String,
    },
}

impl State {
    fn reason(&self) -> &str {
        match self {
            State::Ready => reason::DATA_VOLUMES_READY,
            State::Working { reason, .. } => reason,
            State::Failed { reason, .. } => reason,
        }
    }

    fn message(&self) -> String {
        match self {
            State::Ready => "ready".to_owned(),
            State::Working { detail, .. } | State::Failed { detail, .. } => {
                let reason = self.reason();
                if detail.is_empty() {
                    reason.to_owned()
                } else {
                    format!("{reason} {detail}")
                }
            }
        }
    }
}

fn state(v: &Sourced) -> State {
    let clone = v.source.is_clone();
    let Some(dv) = v.data_volume else {
        return working(reason::DATA_VOLUME_PENDING, String::new());
    };
    let status = dv.status.clone().unwrap_or_default();
    let conditions = &status.conditions;
    if let Some(c) = with_reason(conditions, &[CLONE_WITHOUT_SOURCE]) {
        return failure(reason::SOURCE_NOT_FOUND, c);
    }
    if let Some(c) = with_reason(conditions, PULL_FAILURES) {
        return failure(reason::IMAGE_PULL_FAILED, c);
    }
    let failed_reason = if clone {
        reason::CLONE_FAILED
    } else {
        reason::IMPORT_FAILED
    };
    let phase = status.phase.as_deref().unwrap_or_default();
    let running = conditions.iter().find(|c| c.type_ == "Running");
    if phase == dv_phase::FAILED {
        return State::Failed {
            reason: failed_reason,
            detail: running.map(describe).unwrap_or_default(),
        };
    }
    if let Some(c) = running.filter(|c| {
        c.status == "False" && WORKER_FAILURES.contains(&c.reason.as_deref().unwrap_or_default())
    }) {
        let restarts = status.restart_count.unwrap_or(0);
        let mut detail = describe(c);
        if restarts > 0 {
            detail = format!("{detail} after {restarts} restarts; CDI retries");
        }
        return State::Failed {
            reason: failed_reason,
            detail,
        };
    }
    match phase {
        "" | dv_phase::PENDING | dv_phase::UNKNOWN => {
            working(reason::DATA_VOLUME_PENDING, phase.to_owned())
        }
        dv_phase::SUCCEEDED if bound(v.claim) => State::Ready,
        dv_phase::SUCCEEDED => working(
            PVC_PENDING,
            format!("(claim {} not bound yet)", v.claim_name),
        ),
        dv_phase::WAIT_FOR_FIRST_CONSUMER => working(
            dv_phase::WAIT_FOR_FIRST_CONSUMER,
            "(CDI starts once the VM's pod is scheduled)".to_owned(),
        ),
        other => working(other, progress(&status.progress).unwrap_or_default()),
    }
}

fn working(reason: &str, detail: String) -> State {
    State::Working {
        reason: reason.to_owned(),
        detail,
    }
}

fn failure(reason: &'static str, c: &DataVolumeCondition) -> State {
    State::Failed {
        reason,
        detail: describe(c),
    }
}

fn with_reason<'c>(
    conditions: &'c [DataVolumeCondition],
    reasons: &[&str],
) -> Option<&'c DataVolumeCondition> {
    conditions
        .iter()
        .find(|c| c.reason.as_deref().is_some_and(|r| reasons.contains(&r)))
}

fn describe(c: &DataVolumeCondition) -> String {
    match (&c.reason, &c.message) {
        (_, Some(m)) if !m.is_empty() => format!("({m})"),
        (Some(r), _) => format!("({r})"),
        _ => String::new(),
    }
}

/// CDI's progress when it knows one (`45.20%`; it says `N/A` otherwise).
fn progress(p: &Option<String>) -> Option<String> {
    p.clone().filter(|p| !p.is_empty() && p != "N/A")
}

fn bound(claim: Option<&PersistentVolumeClaim>) -> bool {
    claim
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.phase.as_deref())
        == Some("Bound")
}

/// A `status.disks[]` entry for a sourced volume.
pub fn sourced_status(v: &Sourced) -> DiskStatus {
    let status = v.data_volume.and_then(|dv| dv.status.as_ref());
    let storage = v.data_volume.and_then(|dv| dv.spec.storage.as_ref());
    DiskStatus {
        name: v.name.to_owned(),
        claim_name: v.claim_name.clone(),
        phase: status
            .and_then(|s| s.phase.clone())
            .filter(|p| !p.is_empty()),
        progress: status.and_then(|s| progress(&s.progress)),
        access_mode: storage.and_then(|s| s.access_modes.first().cloned()),
        volume_mode: storage.and_then(|s| s.volume_mode.clone()),
        hotplug: None,
    }
}

/// `status.vmStatus`: the VM's printableStatus (Provisioning, Starting, Running, …).
pub fn vm_status(vm: Option<&VirtualMachine>) -> Option<String> {
    vm.and_then(|v| v.status.as_ref())
        .and_then(|s| s.printable_status.clone())
}

/// An Event to record: (Normal or Warning, reason, message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// Events for provisioning steps since the previous status: an import or clone starting and
/// succeeding per volume, and StorageReady turning to a failure reason.
pub fn events(
    previous: Option<&MachineStatus>,
    volumes: &[Sourced],
    now: &[DiskStatus],
    storage: Option<&Verdict>,
) -> Vec<Event> {
    let before = |name: &str| -> Option<String> {
        previous?
            .disks
            .iter()
            .find(|d| d.name == name)
            .and_then(|d| d.phase.clone())
    };
    let mut out = Vec::new();
    for (v, d) in volumes.iter().zip(now) {
        let (started, succeeded) = if v.source.is_clone() {
            (reason::CLONE_STARTED, reason::CLONE_SUCCEEDED)
        } else {
            (reason::IMPORT_STARTED, reason::IMPORT_SUCCEEDED)
        };
        let was = before(&d.name);
        let was = was.as_deref().unwrap_or_default();
        let is = d.phase.as_deref().unwrap_or_default();
        if is == was {
            continue;
        }
        if is == dv_phase::SUCCEEDED {
            out.push(Event {
                warning: false,
                reason: succeeded.to_owned(),
                message: format!("{}: DataVolume {} succeeded", v.label, v.claim_name),
            });
        } else if is_idle(was) && !is_idle(is) && is != dv_phase::FAILED {
            out.push(Event {
                warning: false,
                reason: started.to_owned(),
                message: format!("{}: {is}", v.label),
            });
        }
    }
    if let Some(v) = storage.filter(|v| !v.ready && !v.waiting) {
        let was = previous
            .and_then(|p| p.conditions.iter().find(|c| c.type_ == "StorageReady"))
            .map(|c| c.reason.as_str());
        if was != Some(v.reason.as_str()) {
            out.push(Event {
                warning: true,
                reason: v.reason.clone(),
                message: v.message.clone(),
            });
        }
    }
    out
}

/// Phases before CDI starts working.
fn is_idle(phase: &str) -> bool {
    matches!(
        phase,
        "" | dv_phase::PENDING | dv_phase::UNKNOWN | dv_phase::WAIT_FOR_FIRST_CONSUMER
    )
}

#[cfg(test)]
mod tests;
