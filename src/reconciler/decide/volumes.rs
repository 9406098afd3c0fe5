//! The disks and CD-ROMs as provisioning sees them: which are DataVolumes, what CDI and the
//! claims say about each (`status.disks[]`, the `StorageReady` verdict), and the Events for
//! their steps. Pure: `run::status` feeds it the observed and just-written objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::runtime::events::EventType;

use crate::api::source::{DiskSource, DiskStatus};
use crate::api::{MachineSpec, MachineStatus};

use super::desired::meta::pvc_name;
use super::provisioning::{self, Sourced, Verdict};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::decide::notices::Notice;

/// A disk with a source or a CD-ROM: a DataVolume named like its claim.
pub struct SourcedVolume<'a> {
    /// `disk root` or `cdrom installer`, as messages name it.
    pub label: String,
    /// A disk (retain-disks covers it), not a CD-ROM (installer media).
    pub disk: bool,
    pub name: &'a str,
    pub claim_name: String,
    pub source: &'a DiskSource,
}

/// The disks with a source, then the CD-ROMs, in spec order.
pub fn sourced_volumes<'a>(machine: &str, spec: &'a MachineSpec) -> Vec<SourcedVolume<'a>> {
    let disks = spec.disks.iter().filter_map(|d| {
        Some(SourcedVolume {
            label: format!("disk {}", d.name),
            disk: true,
            name: &d.name,
            claim_name: pvc_name(machine, &d.name),
            source: d.source.as_ref()?,
        })
    });
    let cdroms = spec.cdroms.iter().map(|c| SourcedVolume {
        label: format!("cdrom {}", c.name),
        disk: false,
        name: &c.name,
        claim_name: pvc_name(machine, &c.name),
        source: &c.source,
    });
    disks.chain(cdroms).collect()
}

/// A DataVolume the spec wants (a disk with a source, or a CD-ROM), by the names it is read,
/// written and reported under; observed once (`Observed::sourced`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub claim_name: String,
    /// `disk root` or `cdrom installer`, as messages name it.
    pub label: String,
    /// A disk (retain-disks covers it), not a CD-ROM.
    pub disk: bool,
}

/// [`sourced_volumes`], by name.
pub fn wanted(machine: &str, spec: &MachineSpec) -> Vec<Wanted> {
    (sourced_volumes(machine, spec).into_iter())
        .map(|v| Wanted {
            claim_name: v.claim_name,
            label: v.label,
            disk: v.disk,
        })
        .collect()
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
    }
}

/// Disk statuses and the DataVolumes' verdict for `machine`'s resolved `spec`.
pub fn view(machine: &str, spec: &MachineSpec, seen: &Seen) -> Provisioning {
    let volumes = sourced_volumes(machine, spec);
    // A refused DataVolume write is a problem (`CloneUnauthorized`, `DataVolumeFailed`) that
    // StorageReady shows before this verdict.
    let list: Vec<Sourced> = volumes.iter().map(|v| sourced(v, seen)).collect();
    let mut disks = Vec::new();
    for d in &spec.disks {
        match list.iter().find(|s| s.name == d.name) {
            Some(s) => disks.push(provisioning::sourced_status(s)),
            None => {
                let claim_name = pvc_name(machine, &d.name);
                let claim = seen.claims.get(&claim_name).copied();
                disks.push(blank_status(&d.name, &claim_name, claim));
            }
        }
    }
    let disk_count = volumes.iter().filter(|v| v.disk).count();
    disks.extend(list[disk_count..].iter().map(provisioning::sourced_status));
    Provisioning {
        disks,
        verdict: provisioning::verdict(&list, seen.cdi_installed),
    }
}

/// A `status.disks[]` entry for a blank disk: its claim's phase.
pub fn blank_status(
    name: &str,
    claim_name: &str,
    claim: Option<&PersistentVolumeClaim>,
) -> DiskStatus {
    let spec = claim.and_then(|c| c.spec.as_ref());
    DiskStatus {
        name: name.to_owned(),
        claim_name: claim_name.to_owned(),
        phase: claim
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.phase.clone()),
        progress: None,
        access_mode: spec.and_then(|s| s.access_modes.as_ref()?.first().cloned()),
        volume_mode: spec.and_then(|s| s.volume_mode.clone()),
        hotplug: None,
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

/// The DataVolumes of CD-ROMs `vm` still mounts that `wanted` (the spec's sourced volumes) no
/// longer names: the only DataVolumes a live Machine may delete. A disk's is never one: its
/// claim holds data, and disks are not removed through the webhook; one gone some other way
/// keeps its volume, as a blank disk's claim does.
pub fn removed_cdroms<'v>(vm: Option<&'v VirtualMachine>, wanted: &[String]) -> Vec<&'v str> {
    let Some(spec) = vm.map(|vm| &vm.spec.template.spec) else {
        return Vec::new();
    };
    let drives = &spec.domain.devices.disks;
    spec.volumes
        .iter()
        .filter(|v| drives.iter().any(|d| d.name == v.name && d.cdrom.is_some()))
        .filter_map(|v| Some(v.data_volume.as_ref()?.name.as_str()))
        .filter(|name| !wanted.iter().any(|w| w == name))
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PersistentVolumeClaimStatus;
    use serde_json::{Value, json};

    use super::*;

    fn spec() -> MachineSpec {
        serde_json::from_value(json!({
            "disks": [{"name": "root", "size": "2Gi", "source": {"http": {"url": "https://a/b"}}},
                      {"name": "data", "size": "1Gi"}],
            "cdroms": [{"name": "iso", "source": {"http": {"url": "https://a/b.iso"}}}]
        }))
        .expect("spec")
    }

    fn dv(name: &str, phase: &str, progress: &str) -> DataVolume {
        serde_json::from_value(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
            "metadata": {"name": name}, "spec": {},
            "status": {"phase": phase, "progress": progress}
        }))
        .expect("dv")
    }

    fn claim(name: &str, phase: &str) -> PersistentVolumeClaim {
        let mut c = PersistentVolumeClaim {
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        c.metadata.name = Some(name.into());
        c
    }

    #[test]
    fn every_disk_then_every_cdrom_with_what_provisioning_says() {
        let spec = spec();
        let (root, iso) = (
            dv("m-root", "ImportInProgress", "45.20%"),
            dv("m-iso", "Succeeded", "100.0%"),
        );
        let (data, iso_claim) = ([claim("m-data", "Bound")], claim("m-iso", "Bound"));
        let root = [root];
        let seen = Seen {
            data_volumes: by_name(&root, [&iso]),
            claims: by_name(&data, [&iso_claim]),
            cdi_installed: true,
        };
        let p = view("m", &spec, &seen);
        let disks: Vec<(&str, &str, Option<&str>, Option<&str>)> = p
            .disks
            .iter()
            .map(|d| {
                let (phase, progress) = (d.phase.as_deref(), d.progress.as_deref());
                (d.name.as_str(), d.claim_name.as_str(), phase, progress)
            })
            .collect();
        assert_eq!(
            disks,
            [
                ("root", "m-root", Some("ImportInProgress"), Some("45.20%")),
                ("data", "m-data", Some("Bound"), None),
                ("iso", "m-iso", Some("Succeeded"), Some("100.0%")),
            ]
        );
        let v = p.verdict.expect("a verdict");
        assert_eq!(
            (v.ready, v.reason.as_str(), v.message.as_str(), v.waiting),
            (
                false,
                "ImportInProgress",
                "disk root: ImportInProgress 45.20%",
                true
            )
        );
    }

    #[test]
    fn only_removed_cdroms_the_vm_still_mounts_may_go() {
        let vm = |disks: Value, volumes: Value| -> VirtualMachine {
            serde_json::from_value(json!({
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                "metadata": {"name": "m"},
                "spec": {"template": {"spec": {"domain": {"devices": {"disks": disks}},
                    "volumes": volumes}}}
            }))
            .expect("vm")
        };
        let live = vm(
            json!([{"name": "root", "disk": {}}, {"name": "data", "disk": {}},
                   {"name": "iso", "cdrom": {}}, {"name": "old-iso", "cdrom": {}}]),
            json!([{"name": "root", "dataVolume": {"name": "m-root"}},
                   {"name": "data", "dataVolume": {"name": "m-data"}},
                   {"name": "iso", "dataVolume": {"name": "m-iso"}},
                   {"name": "old-iso", "dataVolume": {"name": "m-old-iso"}}]),
        );
        // The spec kept root and iso: data (a disk, gone without the webhook) is kept.
        let wanted = ["m-root".to_owned(), "m-iso".to_owned()];
        assert_eq!(removed_cdroms(Some(&live), &wanted), ["m-old-iso"]);
        assert!(removed_cdroms(None, &wanted).is_empty(), "no VM: nothing");
    }

    #[test]
    fn without_sources_no_verdict() {
        let spec: MachineSpec =
            serde_json::from_value(json!({"disks": [{"name": "data", "size": "1Gi"}]}))
                .expect("spec");
        let seen = Seen {
            data_volumes: BTreeMap::new(),
            claims: BTreeMap::new(),
            cdi_installed: false,
        };
        let p = view("m", &spec, &seen);
        assert!(p.verdict.is_none());
        assert_eq!(p.disks.len(), 1);
        assert_eq!(p.disks[0].phase, None, "no claim yet");
    }
}
