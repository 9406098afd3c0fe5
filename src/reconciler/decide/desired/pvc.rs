//! One PersistentVolumeClaim per resolved disk.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;

use crate::api::Machine;
use crate::api::machine::Disk;
use crate::machine::resolve::{DEFAULT_ACCESS_MODE, DEFAULT_VOLUME_MODE};

use super::meta::{owned_by_machine, pvc_name};

/// The claim for `disk` (already resolved, so its size and modes are set). A disk without a
/// StorageClass leaves `storageClassName` out so the cluster's default class applies.
pub fn pvc(machine: &Machine, disk: &Disk) -> PersistentVolumeClaim {
    let requests = disk
        .size
        .as_ref()
        .map(|size| BTreeMap::from([("storage".to_owned(), Quantity(size.0.clone()))]));
    PersistentVolumeClaim {
        metadata: owned_by_machine(machine, pvc_name(&machine.name_any(), &disk.name)),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![
                disk.access_mode
                    .clone()
                    .unwrap_or_else(|| DEFAULT_ACCESS_MODE.to_owned()),
            ]),
            resources: Some(VolumeResourceRequirements {
                requests,
                ..VolumeResourceRequirements::default()
            }),
            storage_class_name: disk.storage_class.clone(),
            volume_mode: Some(
                disk.volume_mode
                    .clone()
                    .unwrap_or_else(|| DEFAULT_VOLUME_MODE.to_owned()),
            ),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}
