//! What may change on update (SPEC.md, "Update rules"): disks hold user data, so they may be added
//! and grown but never removed (but for one hot-plugged: it is detached, its claim kept),
//! shrunk or moved to another class, access mode or volume mode.
//! Both specs are resolved, so a value the template supplies is compared like one the user set.

use std::cmp::Ordering;

use serde_json::Value;

use crate::api::MachineSpec;
use crate::api::machine::Disk;

use super::field_error::{FieldError, FieldPath};
use super::sources::{cdrom_updates, disk_source_update};

/// The errors of the update from `old` to `new`; the disks `hotplugged` (as the stored status
/// shows them) may be removed.
pub fn validate_update(
    old: &MachineSpec,
    new: &MachineSpec,
    hotplugged: &[String],
) -> Vec<FieldError> {
    let spec_path = FieldPath::new("spec");
    let disks_path = spec_path.child("disks");
    let mut errors = super::clones::update_errors(old, new);
    for old_disk in &old.disks {
        let Some((i, new_disk)) = new
            .disks
            .iter()
            .enumerate()
            .find(|(_, d)| d.name == old_disk.name)
        else {
            if hotplugged.contains(&old_disk.name) {
                continue;
            }
            errors.push(FieldError::forbidden(
                &disks_path,
                format!(
                    "disk {:?} may not be removed: its PersistentVolumeClaim holds the guest's data; \
                     to remove it, delete the Machine (annotate it vitistack.io/retain-disks=true to keep the volumes)",
                    old_disk.name
                ),
            ));
            continue;
        };
        let p = disks_path.index(i);
        if let (Some(old_size), Some(new_size)) = (&old_disk.size, &new_disk.size)
            && old_size.compare(new_size) == Some(Ordering::Greater)
        {
            errors.push(FieldError::forbidden(
                &p.child("size"),
                format!(
                    "disk {:?} may not shrink from {old_size} to {new_size}; disks can only grow",
                    old_disk.name
                ),
            ));
        }
        errors.extend(disk_source_update(&p, old_disk, new_disk));
        if old_disk.size.is_some() && new_disk.size.is_none() {
            errors.push(FieldError::forbidden(
                &p.child("size"),
                format!(
                    "disk {:?} may not drop its size of {}: disks can only grow",
                    old_disk.name,
                    old_disk
                        .size
                        .as_ref()
                        .map(|q| q.as_str())
                        .unwrap_or_default()
                ),
            ));
        }
        immutable(
            &mut errors,
            &p.child("storageClass"),
            old_disk,
            new_disk,
            |d| &d.storage_class,
        );
        immutable(
            &mut errors,
            &p.child("accessMode"),
            old_disk,
            new_disk,
            |d| &d.access_mode,
        );
        immutable(
            &mut errors,
            &p.child("volumeMode"),
            old_disk,
            new_disk,
            |d| &d.volume_mode,
        );
    }
    errors.extend(cdrom_updates(
        &spec_path.child("cdroms"),
        &old.cdroms,
        &new.cdroms,
    ));
    errors.extend(swapped_names(&spec_path, old, new));
    errors
}

/// A name that changes between CD-ROM and disk in one update. Both keep their volume in an
/// object named `<machine>-<name>`: the CD-ROM's DataVolume is deleted once the VM no longer
/// mounts it, so a disk taking its name at once would take over, or lose, that volume.
fn swapped_names(spec: &FieldPath, old: &MachineSpec, new: &MachineSpec) -> Vec<FieldError> {
    let was_cdrom = |name: &str| old.cdroms.iter().any(|c| c.name == name);
    let was_disk = |name: &str| old.disks.iter().any(|d| d.name == name);
    let disks = spec.child("disks");
    let cdroms = spec.child("cdroms");
    let disk_errors = new.disks.iter().enumerate();
    let disk_errors = disk_errors
        .filter(|(_, d)| was_cdrom(&d.name) && !was_disk(&d.name))
        .map(|(i, d)| {
            let item = disks.index(i);
            FieldError::invalid(
                &item.child("name"),
                d.name.as_str(),
                "was a CD-ROM; a disk may not take a CD-ROM's name in the same update \
                 (remove the CD-ROM first)",
            )
        });
    let cdrom_errors = new.cdroms.iter().enumerate();
    let cdrom_errors = cdrom_errors
        .filter(|(_, c)| was_disk(&c.name) && !was_cdrom(&c.name))
        .map(|(i, c)| {
            let item = cdroms.index(i);
            FieldError::invalid(
                &item.child("name"),
                c.name.as_str(),
                "was a disk; a CD-ROM may not take a disk's name in the same update",
            )
        });
    disk_errors.chain(cdrom_errors).collect()
}

fn immutable(
    errors: &mut Vec<FieldError>,
    path: &FieldPath,
    old: &Disk,
    new: &Disk,
    field: impl Fn(&Disk) -> &Option<String>,
) {
    if field(old) != field(new) {
        let value = field(new).clone().map_or(Value::Null, Value::String);
        errors.push(FieldError::invalid(path, value, "field is immutable"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Catalog, resolve};

    fn resolved(json: serde_json::Value) -> MachineSpec {
        resolve(
            &serde_json::from_value(json).expect("test spec"),
            None,
            &Catalog::default(),
        )
        .spec
    }

    fn errors(old: serde_json::Value, new: serde_json::Value) -> Vec<String> {
        validate_update(&resolved(old), &resolved(new), &[])
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn disks_may_grow_and_be_added() {
        let old =
            serde_json::json!({"template": "small", "disks": [{"name": "data", "size": "10Gi"}]});
        let new = serde_json::json!({"template": "small", "disks": [{"name": "data", "size": "20Gi"}, {"name": "logs", "size": "1Gi"}]});
        assert!(errors(old.clone(), new).is_empty());
        let bigger_template =
            serde_json::json!({"template": "large", "disks": [{"name": "data", "size": "10Gi"}]});
        assert!(errors(old, bigger_template).is_empty());
    }

    #[test]
    fn disks_may_not_shrink() {
        assert_eq!(
            errors(
                serde_json::json!({"disks": [{"name": "data", "size": "1Gi"}]}),
                serde_json::json!({"disks": [{"name": "data", "size": "1000Mi"}]})
            ),
            [
                r#"spec.disks[1].size: Forbidden: disk "data" may not shrink from 1Gi to 1000Mi; disks can only grow"#
            ]
        );
        // A template change that would shrink the root disk is caught the same way.
        assert_eq!(
            errors(
                serde_json::json!({"template": "large"}),
                serde_json::json!({"template": "small"})
            ),
            [
                r#"spec.disks[0].size: Forbidden: disk "root" may not shrink from 80Gi to 20Gi; disks can only grow"#
            ]
        );
        // Same size in other units is not a shrink.
        assert!(
            errors(
                serde_json::json!({"disks": [{"name": "root", "size": "1Gi"}]}),
                serde_json::json!({"disks": [{"name": "root", "size": "1024Mi"}]})
            )
            .is_empty()
        );
    }

    #[test]
    fn class_and_modes_are_immutable() {
        let old = serde_json::json!({"disks": [{"name": "d", "size": "1Gi", "storageClass": "a"}]});
        let new = serde_json::json!({"disks": [{"name": "d", "size": "1Gi", "storageClass": "b", "accessMode": "ReadWriteMany", "volumeMode": "Block"}]});
        assert_eq!(
            errors(old.clone(), new),
            [
                r#"spec.disks[1].storageClass: Invalid value: "b": field is immutable"#,
                r#"spec.disks[1].accessMode: Invalid value: "ReadWriteMany": field is immutable"#,
                r#"spec.disks[1].volumeMode: Invalid value: "Block": field is immutable"#,
            ]
        );
        let unset = serde_json::json!({"disks": [{"name": "d", "size": "1Gi"}]});
        assert_eq!(
            errors(old, unset),
            ["spec.disks[1].storageClass: Invalid value: null: field is immutable"]
        );
    }

    #[test]
    fn disks_may_not_be_removed() {
        let e = errors(
            serde_json::json!({"disks": [{"name": "data", "size": "1Gi"}]}),
            serde_json::json!({}),
        );
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with(r#"spec.disks: Forbidden: disk "data" may not be removed: its PersistentVolumeClaim holds the guest's data"#), "{e:?}");
    }

    /// A hot-plugged disk is detached when removed, its claim kept (`decide::hotplug::unplug`).
    #[test]
    fn a_hot_plugged_disk_may_be_removed() {
        let r = resolved;
        let old = r(
            serde_json::json!({"disks": [{"name": "root", "size": "1Gi"}, {"name": "data", "size": "1Gi"}]}),
        );
        let new = r(serde_json::json!({"disks": [{"name": "root", "size": "1Gi"}]}));
        assert!(validate_update(&old, &new, &["data".to_owned()]).is_empty());
        let e = validate_update(&old, &new, &["root".to_owned()]);
        assert_eq!(e.len(), 1, "{e:?}");
    }

    /// A CD-ROM's DataVolume `<machine>-<name>` goes once the VM no longer mounts it; a disk's
    /// claim of the same name made in that update would be taken or lost with it.
    #[test]
    fn a_cdrom_and_a_disk_never_swap_a_name_in_one_update() {
        let iso = |name: &str| serde_json::json!({"name": name, "source": {"http": {"url": "https://a/b.iso"}}});
        let disk = |name: &str| serde_json::json!({"name": name, "size": "1Gi"});
        let cases = [
            (
                "CD-ROM x becomes disk x",
                serde_json::json!({"cdroms": [iso("x")]}),
                serde_json::json!({"disks": [disk("x")]}),
                vec![
                    r#"spec.disks[1].name: Invalid value: "x": was a CD-ROM; a disk may not take a CD-ROM's name in the same update (remove the CD-ROM first)"#,
                ],
            ),
            (
                "disk x becomes CD-ROM x",
                serde_json::json!({"disks": [disk("x")]}),
                serde_json::json!({"cdroms": [iso("x")]}),
                vec![
                    r#"spec.disks: Forbidden: disk "x" may not be removed: its PersistentVolumeClaim holds the guest's data; to remove it, delete the Machine (annotate it vitistack.io/retain-disks=true to keep the volumes)"#,
                    r#"spec.cdroms[0].name: Invalid value: "x": was a disk; a CD-ROM may not take a disk's name in the same update"#,
                ],
            ),
            (
                "CD-ROM removed, disk of another name added",
                serde_json::json!({"cdroms": [iso("x")]}),
                serde_json::json!({"disks": [disk("y")]}),
                vec![],
            ),
            (
                "CD-ROM x kept, disk y added",
                serde_json::json!({"cdroms": [iso("x")]}),
                serde_json::json!({"cdroms": [iso("x")], "disks": [disk("y")]}),
                vec![],
            ),
        ];
        for (what, old, new, want) in cases {
            assert_eq!(errors(old, new), want, "{what}");
        }
        // Once the CD-ROM is gone from the stored Machine, the name is free.
        assert!(
            errors(
                serde_json::json!({}),
                serde_json::json!({"disks": [disk("x")]})
            )
            .is_empty()
        );
    }

    #[test]
    fn everything_else_may_change() {
        let old = serde_json::json!({"resources": {"cpu": {"cores": 2}, "memory": {"size": "4Gi"}}, "running": true,
                                     "networks": [{"name": "a", "networkName": "x"}], "cloudInit": {"userData": "a"}});
        let new = serde_json::json!({"resources": {"cpu": {"cores": 8, "threads": 2}, "memory": {"size": "2Gi"}}, "running": false,
                                     "networks": [{"name": "b", "networkName": "y", "model": "e1000"}], "cloudInit": {"userData": "b"}});
        assert!(errors(old, new).is_empty());
    }
}
