//! CDI DataVolumes for the disks with a source and for the CD-ROMs, and how the VM mounts them.
//!
//! A DataVolume is named like the claim a blank disk gets (`<machine>-<name>`): CDI names the
//! claim it populates after the DataVolume, so a disk keeps its claim name whatever its source.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::api::Machine;
use crate::api::clone_sources::{CloneSources, PinnedSource};
use crate::api::machine::Disk;
use crate::api::source::{Cdrom, DEFAULT_CDROM_SIZE, DiskSource};
use crate::reconciler::apis::cdi::{
    ALLOW_CLAIM_ADOPTION, DELETE_AFTER_COMPLETION, DataVolume, DataVolumeSource, DataVolumeSpec,
    HttpSource, PvcSource, RegistrySource, SnapshotSource, StorageResources, StorageSpec,
};
use crate::reconciler::apis::kubevirt::{
    self, CdromTarget, DataVolumeRef, PvcSource as VmPvc, Volume,
};

use super::meta::{owned_by_machine, pvc_name};

/// KubeVirt's bus for CD-ROMs (virtio has no CD-ROM device).
pub const CDROM_BUS: &str = "sata";

/// One DataVolume per given disk that has a source, then one per CD-ROM, in order. A
/// `dataSource` volume clones what admission pinned (`pins`); unpinned, it has no source at all:
/// `disks::decide` keeps the source of one already made and makes none.
pub fn data_volumes<'a>(
    machine: &Machine,
    pins: &CloneSources,
    disks: impl IntoIterator<Item = &'a Disk>,
    cdroms: &[Cdrom],
) -> Vec<DataVolume> {
    let disks = disks.into_iter().filter_map(|d| {
        let source = d.source.as_ref()?;
        Some(data_volume(machine, pins, &d.name, source, disk_storage(d)))
    });
    let cdroms =
        (cdroms.iter()).map(|c| data_volume(machine, pins, &c.name, &c.source, cdrom_storage(c)));
    disks.chain(cdroms).collect()
}

fn data_volume(
    machine: &Machine,
    pins: &CloneSources,
    name: &str,
    source: &DiskSource,
    storage: StorageSpec,
) -> DataVolume {
    let namespace = machine.namespace().unwrap_or_default();
    let in_ns = |ns: &Option<String>| ns.clone().unwrap_or_else(|| namespace.clone());
    let mut spec = DataVolumeSpec {
        storage: Some(storage),
        ..DataVolumeSpec::default()
    };
    if source.data_source.is_some() {
        // What the author was asked about at admission, never where the DataSource points now.
        spec.source = pins.get(name).map(|pin| match pin {
            PinnedSource::Pvc { namespace, name } => DataVolumeSource {
                pvc: Some(PvcSource {
                    namespace: namespace.clone(),
                    name: name.clone(),
                }),
                ..DataVolumeSource::default()
            },
            PinnedSource::Snapshot { namespace, name } => DataVolumeSource {
                snapshot: Some(SnapshotSource {
                    namespace: namespace.clone(),
                    name: name.clone(),
                }),
                ..DataVolumeSource::default()
            },
        });
    } else {
        spec.source = Some(DataVolumeSource {
            http: source.http.as_ref().map(|h| HttpSource {
                url: h.url.clone(),
                secret_ref: h.secret_ref.as_ref().map(|r| r.name.clone()),
                cert_config_map: h.cert_config_map.clone(),
            }),
            registry: source.registry.as_ref().map(|r| RegistrySource {
                url: r.url.clone(),
                secret_ref: r.secret_ref.as_ref().map(|s| s.name.clone()),
                pull_method: r.pull_method.clone(),
            }),
            pvc: source.pvc.as_ref().map(|p| PvcSource {
                name: p.name.clone(),
                namespace: in_ns(&p.namespace),
            }),
            snapshot: source.snapshot.as_ref().map(|v| SnapshotSource {
                name: v.name.clone(),
                namespace: in_ns(&v.namespace),
            }),
        });
    }
    DataVolume {
        metadata: metadata(machine, name),
        spec,
        status: None,
    }
}

/// The metadata of the DataVolume of `machine`'s disk or CD-ROM `name`.
fn metadata(machine: &Machine, name: &str) -> ObjectMeta {
    let mut metadata = owned_by_machine(machine, pvc_name(&machine.name_any(), name));
    // CDI neither deletes a DataVolume once imported (our retain-disks and drift would recreate
    // it, which CDI refuses) nor adopts a claim of its name that it did not make.
    metadata.annotations = Some(BTreeMap::from([
        (DELETE_AFTER_COMPLETION.to_owned(), "false".to_owned()),
        (ALLOW_CLAIM_ADOPTION.to_owned(), "false".to_owned()),
    ]));
    metadata
}

/// The DataVolume of `machine`'s disk `disk` made again by a restore: a CDI clone of the
/// restored claim `from` (in the Machine's namespace) with `storage`, and the metadata of every
/// DataVolume the reconciler makes. The reconciler keeps its source as it keeps any made
/// DataVolume's (`disks::decide`): CDI refuses a change, and a new one would import again.
pub fn restored(machine: &Machine, disk: &str, from: &str, storage: StorageSpec) -> DataVolume {
    DataVolume {
        metadata: metadata(machine, disk),
        spec: DataVolumeSpec {
            source: Some(DataVolumeSource {
                pvc: Some(PvcSource {
                    namespace: machine.namespace().unwrap_or_default(),
                    name: from.to_owned(),
                }),
                ..DataVolumeSource::default()
            }),
            storage: Some(storage),
            ..DataVolumeSpec::default()
        },
        status: None,
    }
}

/// The disk's resolved size and modes; no size for a clone that takes its source's.
fn disk_storage(disk: &Disk) -> StorageSpec {
    StorageSpec {
        access_modes: disk.access_mode.clone().into_iter().collect(),
        resources: disk.size.as_ref().map(|s| requests(s.as_str())),
        storage_class_name: disk.storage_class.clone(),
        volume_mode: disk.volume_mode.clone(),
    }
}

/// A CD-ROM sets only a size; CDI's StorageProfile picks the modes and the default class.
fn cdrom_storage(cdrom: &Cdrom) -> StorageSpec {
    let size = match (&cdrom.size, cdrom.source.is_clone()) {
        (Some(size), _) => Some(size.as_str()),
        (None, true) => None,
        (None, false) => Some(DEFAULT_CDROM_SIZE),
    };
    StorageSpec {
        resources: size.map(requests),
        ..StorageSpec::default()
    }
}

fn requests(size: &str) -> StorageResources {
    StorageResources {
        requests: BTreeMap::from([("storage".to_owned(), size.to_owned())]),
    }
}

/// The VM volume of a disk: its DataVolume when it has a source, else its claim.
pub fn disk_volume(machine: &str, disk: &Disk) -> Volume {
    let claim = pvc_name(machine, &disk.name);
    match disk.source {
        Some(_) => data_volume_volume(&disk.name, claim),
        None => Volume {
            name: disk.name.clone(),
            persistent_volume_claim: Some(VmPvc {
                claim_name: claim,
                hotpluggable: false,
            }),
            ..Volume::default()
        },
    }
}

/// A CD-ROM's drive and volume.
pub fn cdrom(machine: &str, cdrom: &Cdrom) -> (kubevirt::Disk, Volume) {
    let device = kubevirt::Disk {
        name: cdrom.name.clone(),
        cdrom: Some(CdromTarget {
            bus: Some(CDROM_BUS.to_owned()),
            readonly: Some(true),
        }),
        ..kubevirt::Disk::default()
    };
    let volume = data_volume_volume(&cdrom.name, pvc_name(machine, &cdrom.name));
    (device, volume)
}

fn data_volume_volume(name: &str, data_volume: String) -> Volume {
    Volume {
        name: name.to_owned(),
        data_volume: Some(DataVolumeRef {
            name: data_volume,
            hotpluggable: false,
        }),
        ..Volume::default()
    }
}

#[cfg(test)]
mod tests;
