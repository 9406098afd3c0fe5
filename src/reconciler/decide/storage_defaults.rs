//! Access and volume modes for a disk that sets none (pure): what CDI's StorageProfile for the
//! disk's StorageClass (or the cluster's default class) lists first in
//! `status.claimPropertySets`, the rule CDI applies to DataVolumes; without a profile (no CDI,
//! or none for that class), ReadWriteOnce and Filesystem as before. Applied to every disk, blank
//! or sourced, so one rule decides; a claim already made keeps its modes (`disks::decide`).

use std::collections::BTreeMap;

use crate::api::MachineSpec;
use crate::machine::resolve::{DEFAULT_ACCESS_MODE, DEFAULT_VOLUME_MODE};
use crate::reconciler::apis::cdi::ClaimPropertySet;

/// What the modes of a disk that sets none depend on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StorageDefaults {
    /// The StorageClass annotated `storageclass.kubernetes.io/is-default-class: "true"`.
    pub default_class: Option<String>,
    /// Each StorageProfile's claim property sets, by StorageClass (the profile's own name).
    pub profiles: BTreeMap<String, Vec<ClaimPropertySet>>,
}

impl StorageDefaults {
    /// The modes for a disk on `class` (`None`: the default class), each kept when given.
    fn modes(&self, class: Option<&str>, access: Option<&str>, volume: Option<&str>) -> Modes {
        let class = class.or(self.default_class.as_deref());
        let sets = class.and_then(|c| self.profiles.get(c)).map(Vec::as_slice);
        let sets = sets.unwrap_or_default();
        let access = access
            .map(str::to_owned)
            .or_else(|| sets.first().and_then(|s| s.access_modes.first().cloned()))
            .unwrap_or_else(|| DEFAULT_ACCESS_MODE.to_owned());
        // The first set offering that access mode says the volume mode, as CDI picks it.
        let volume = volume
            .map(str::to_owned)
            .or_else(|| {
                let set = sets.iter().find(|s| s.access_modes.contains(&access));
                set.and_then(|s| s.volume_mode.clone())
            })
            .unwrap_or_else(|| DEFAULT_VOLUME_MODE.to_owned());
        Modes { access, volume }
    }
}

struct Modes {
    access: String,
    volume: String,
}

/// `spec` with every disk's access and volume mode set.
pub fn fill(mut spec: MachineSpec, defaults: &StorageDefaults) -> MachineSpec {
    for d in &mut spec.disks {
        if d.access_mode.is_some() && d.volume_mode.is_some() {
            continue;
        }
        let m = defaults.modes(
            d.storage_class.as_deref(),
            d.access_mode.as_deref(),
            d.volume_mode.as_deref(),
        );
        d.access_mode = Some(m.access);
        d.volume_mode = Some(m.volume);
    }
    spec
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn set(modes: &[&str], volume: Option<&str>) -> ClaimPropertySet {
        ClaimPropertySet {
            access_modes: modes.iter().map(|m| (*m).to_owned()).collect(),
            volume_mode: volume.map(str::to_owned),
        }
    }

    #[test]
    fn a_disk_without_modes_takes_its_classs_first_claim_property_set() {
        let defaults = StorageDefaults {
            default_class: Some("ceph-rbd".into()),
            profiles: BTreeMap::from([
                (
                    "ceph-rbd".to_owned(),
                    vec![
                        set(&["ReadWriteMany"], Some("Block")),
                        set(&["ReadWriteOnce"], Some("Filesystem")),
                    ],
                ),
                (
                    "local".to_owned(),
                    vec![set(&["ReadWriteOnce"], Some("Filesystem"))],
                ),
                ("empty".to_owned(), vec![]),
            ]),
        };
        let spec: MachineSpec = serde_json::from_value(json!({"disks": [
            {"name": "default-class"},
            {"name": "rbd", "storageClass": "ceph-rbd"},
            {"name": "local", "storageClass": "local"},
            {"name": "no-profile", "storageClass": "nfs"},
            {"name": "profile-lists-none", "storageClass": "empty"},
            {"name": "access-given", "storageClass": "ceph-rbd", "accessMode": "ReadWriteOnce"},
            {"name": "both-given", "storageClass": "ceph-rbd", "accessMode": "ReadWriteOnce", "volumeMode": "Block"}
        ]}))
        .expect("spec");
        let modes: Vec<(String, String, String)> = fill(spec, &defaults)
            .disks
            .into_iter()
            .map(|d| {
                (
                    d.name,
                    d.access_mode.unwrap_or_default(),
                    d.volume_mode.unwrap_or_default(),
                )
            })
            .collect();
        let want = [
            ("default-class", "ReadWriteMany", "Block"),
            ("rbd", "ReadWriteMany", "Block"),
            ("local", "ReadWriteOnce", "Filesystem"),
            ("no-profile", "ReadWriteOnce", "Filesystem"),
            ("profile-lists-none", "ReadWriteOnce", "Filesystem"),
            // The volume mode of the first set offering the given access mode.
            ("access-given", "ReadWriteOnce", "Filesystem"),
            ("both-given", "ReadWriteOnce", "Block"),
        ];
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(n, a, v)| ((*n).to_owned(), (*a).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(modes, want);
        // No CDI, no default class: the modes of before.
        let spec: MachineSpec =
            serde_json::from_value(json!({"disks": [{"name": "d"}]})).expect("spec");
        let d = &fill(spec, &StorageDefaults::default()).disks[0];
        assert_eq!(
            (d.access_mode.as_deref(), d.volume_mode.as_deref()),
            (Some("ReadWriteOnce"), Some("Filesystem"))
        );
    }
}
