//! What may change on update (SPEC.md, "Update rules"): disks hold user data, so they may be added
//! and grown but never removed, shrunk or moved to another class, access mode or volume mode.
//! Both specs are resolved, so a value the template supplies is compared like one the user set.

use std::cmp::Ordering;

use serde_json::Value;

use crate::api::MachineSpec;
use crate::api::machine::Disk;

use super::field_error::{FieldError, FieldPath};

pub fn validate_update(old: &MachineSpec, new: &MachineSpec) -> Vec<FieldError> {
    let disks_path = FieldPath::new("spec").child("disks");
    let mut errors = Vec::new();
    for old_disk in &old.disks {
        let Some((i, new_disk)) = new
            .disks
            .iter()
            .enumerate()
            .find(|(_, d)| d.name == old_disk.name)
        else {
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
        if let (Some(old_size), Some(new_size)) = (&old_disk.size, &new_disk.size) {
            if old_size.compare(new_size) == Some(Ordering::Greater) {
                errors.push(FieldError::forbidden(
                    &p.child("size"),
                    format!("disk {:?} may not shrink from {old_size} to {new_size}; disks can only grow", old_disk.name),
                ));
            }
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
    errors
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
