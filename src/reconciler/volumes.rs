//! The disks and CD-ROMs as provisioning sees them: which are DataVolumes, what CDI and the
//! claims say about each (`status.disks[]`, the `StorageReady` verdict), and the Events for
//! their steps. Pure: `act` feeds it the observed and just-written objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::runtime::events::EventType;

use crate::api::source::{DiskSource, DiskStatus};
use crate::api::{MachineSpec, MachineStatus};

use super::cdi::DataVolume;
use super::desired::meta::pvc_name;
use super::events::Notice;
use super::provisioning::{self, Sourced, Verdict};

/// A disk with a source or a CD-ROM: a DataVolume named like its claim.
pub struct SourcedVolume<'a> {
    /// `disk root` or `cdrom installer`, as messages name it.
    pub label: String,
    pub name: &'a str,
    pub claim_name: String,
    pub source: &'a DiskSource,
}

/// The disks with a source, then the CD-ROMs, in spec order.
pub fn sourced_volumes<'a>(machine: &str, spec: &'a MachineSpec) -> Vec<SourcedVolume<'a>> {
    let disks = spec.disks.iter().filter_map(|d| {
        Some(SourcedVolume {
            label: format!("disk {}", d.name),
            name: &d.name,
            claim_name: pvc_name(machine, &d.name),
            source: d.source.as_ref()?,
        })
    });
    let cdroms = spec.cdroms.iter().map(|c| SourcedVolume {
        label: format!("cdrom {}", c.name),
        name: &c.name,
        claim_name: pvc_name(machine, &c.name),
        source: &c.source,
    });
    disks.chain(cdroms).collect()
}

/// What provisioning shows for one Machine.
pub struct Provisioning {
    /// `status.disks[]`: every disk, then every CD-ROM.
    pub disks: Vec<DiskStatus>,
    /// The verdict on the DataVolumes; `None` when the Machine has none.
    pub verdict: Option<Verdict>,
}

/// The objects `view` reads, by name: DataVolumes and claims (written ones win over observed).
pub struct Seen<'a> {
    pub data_volumes: BTreeMap<String, &'a DataVolume>,
    pub claims: BTreeMap<String, &'a PersistentVolumeClaim>,
    /// DataVolume writes the API server refused (name, its message).
    pub refused: BTreeMap<String, String>,
    pub cdi_installed: bool,
}

fn sourced<'a>(v: &SourcedVolume<'a>, seen: &Seen<'a>) -> Sourced<'a> {
    Sourced {
        label: v.label.clone(),
        name: v.name,
        claim_name: v.claim_name.clone(),
        source: v.source,
        data_volume: seen.data_volumes.get(&v.claim_name).copied(),
        claim: seen.claims.get(&v.claim_name).copied(),
        refused: None,
    }
}

/// Disk statuses and the DataVolumes' verdict for `machine`'s resolved `spec`.
pub fn view(machine: &str, spec: &MachineSpec, seen: &Seen) -> Provisioning {
    let volumes = sourced_volumes(machine, spec);
    let mut list: Vec<Sourced> = volumes.iter().map(|v| sourced(v, seen)).collect();
    for s in &mut list {
        s.refused = seen.refused.get(&s.claim_name).map(String::as_str);
    }
    let mut disks = Vec::new();
    for d in &spec.disks {
        match list.iter().find(|s| s.name == d.name) {
            Some(s) => disks.push(provisioning::sourced_status(s)),
            None => {
                let claim_name = pvc_name(machine, &d.name);
                let claim = seen.claims.get(&claim_name).copied();
                disks.push(provisioning::blank_status(&d.name, &claim_name, claim));
            }
        }
    }
    let disk_count = list.iter().filter(|s| s.label.starts_with("disk ")).count();
    disks.extend(list[disk_count..].iter().map(provisioning::sourced_status));
    Provisioning {
        disks,
        verdict: provisioning::verdict(&list, seen.cdi_installed),
    }
}

/// Events for provisioning steps from `old` to `new` (import or clone started and succeeded
/// per volume; a failure once, when StorageReady takes its reason).
pub fn notices(
    machine: &str,
    spec: &MachineSpec,
    seen: &Seen,
    old: Option<&MachineStatus>,
    new: &MachineStatus,
    verdict: Option<&Verdict>,
) -> Vec<Notice> {
    let volumes = sourced_volumes(machine, spec);
    let list: Vec<Sourced> = volumes.iter().map(|v| sourced(v, seen)).collect();
    let now: Vec<DiskStatus> = list.iter().map(provisioning::sourced_status).collect();
    let shown = new
        .conditions
        .iter()
        .find(|c| c.type_ == super::status::condition::STORAGE_READY)
        .map(|c| c.reason.as_str());
    // Only a verdict the condition shows is announced (a conflict, say, may hide it).
    let verdict = verdict.filter(|v| Some(v.reason.as_str()) == shown);
    provisioning::events(old, &list, &now, verdict)
        .into_iter()
        .map(|e| Notice {
            type_: if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: e.reason,
            note: e.message,
        })
        .collect()
}

/// The DataVolumes and claims by name, `written` first.
pub fn by_name<'a, K: ResourceExt>(
    written: &'a [K],
    observed: impl IntoIterator<Item = &'a K>,
) -> BTreeMap<String, &'a K> {
    let mut out: BTreeMap<String, &K> = observed.into_iter().map(|k| (k.name_any(), k)).collect();
    out.extend(written.iter().map(|k| (k.name_any(), k)));
    out
}
