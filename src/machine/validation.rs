//! Every rule a Machine spec must satisfy, reported all at once with Kubernetes field paths.
//!
//! [`validate`] is correct both on what a user wrote and on a resolved spec: a rule that needs
//! the template (a disk without a size) asks whether the template provides the value.

use std::collections::HashMap;

use serde_json::Value;

use crate::api::domain::Domain;
use crate::api::machine::{
    ACCESS_MODES, BOOT_DEVICES, CloudInit, Disk, MAX_BOOT_ORDER, MAX_DISKS, MAX_NETWORKS,
    MachineSpec, VOLUME_MODES,
};
use crate::api::names::CLOUD_INIT_VOLUME;
use crate::api::quantity::{Amount, Quantity};
use crate::api::source::MAX_CDROMS;

use super::catalog::Catalog;
use super::classes::{Class, Use, choose};
use super::field_error::{FieldError, FieldPath};
use super::machine_types::machine_type_errors;
use super::names::{config_key, dns1123_label, dns1123_subdomain};
use super::sizes::claim_size_problem;
use super::sources::{check_cdroms, check_source};

/// virt-api's limits on inline cloud-init data (`cloudInitUserMaxLen`, `cloudInitNetworkMaxLen`,
/// both 2048 since 2019). Larger network data reaches the VM through the Machine's derived
/// Secret (`networkDataSecretRef`), up to [`MAX_NETWORK_DATA`].
pub const MAX_USER_DATA: usize = 2048;
pub const MAX_INLINE_NETWORK_DATA: usize = 2048;
pub const MAX_NETWORK_DATA: usize = 16 * 1024;

/// The first `max` items, reporting the rest as too many: per-item work stays bounded.
fn bounded<'a, T>(out: &mut Outcome, path: &FieldPath, items: &'a [T], max: usize) -> &'a [T] {
    if items.len() > max {
        out.errors
            .push(FieldError::too_many(path, items.len(), max));
        &items[..max]
    } else {
        items
    }
}

/// The errors one rule of the spec (`rule`) finds in `spec`, as text: for the rules' tables.
#[cfg(test)]
fn rule_errors(
    rule: fn(&mut Outcome, &FieldPath, &MachineSpec),
    spec: serde_json::Value,
) -> Vec<String> {
    let spec: MachineSpec = serde_json::from_value(spec).expect("spec");
    let mut out = Outcome::default();
    rule(&mut out, &FieldPath::new("spec"), &spec);
    out.errors.iter().map(ToString::to_string).collect()
}

/// Errors and warnings of one validation pass.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

/// Validates the Machine's name (when known; generateName leaves it empty at mutation time).
pub fn validate_name(name: &str) -> Vec<FieldError> {
    let metadata = FieldPath::new("metadata");
    let path = metadata.child("name");
    if name.is_empty() {
        return Vec::new();
    }
    dns1123_label(name)
        .into_iter()
        .map(|msg| {
            FieldError::invalid(
                &path,
                name,
                format!(
                    "{msg} (the Machine name becomes the VirtualMachine's and its disks' names)"
                ),
            )
        })
        .collect()
}

/// Every rule on a Machine that chooses its class now (see [`validate_in`]): the class must be
/// usable and enabled.
pub fn validate(spec: &MachineSpec, catalog: &Catalog) -> Outcome {
    let name = spec
        .template
        .as_deref()
        .unwrap_or_else(|| catalog.default_name());
    match choose(catalog, name, Use::New) {
        Ok(class) => validate_in(spec, Some(class), catalog),
        Err(e) => {
            let mut out = validate_in(spec, None, catalog);
            out.errors.insert(0, e);
            out
        }
    }
}

/// Every rule but the class's own: `class` is the one chosen (`classes::choose`), none when it
/// was refused (the refusal is the caller's to report).
pub fn validate_in(spec: &MachineSpec, class: Option<&Class>, catalog: &Catalog) -> Outcome {
    let mut out = Outcome::default();
    let spec_path = FieldPath::new("spec");
    let template = class;

    resources::validate(&mut out, &spec_path, spec);

    let template_disk = |name: &str| template.is_some_and(|t| t.disk(name).is_some());
    let disks_path = spec_path.child("disks");
    let disks = bounded(&mut out, &disks_path, &spec.disks, MAX_DISKS);
    validate_disks(
        &mut out,
        &disks_path,
        disks,
        &template_disk,
        template.map(|t| t.name.as_str()),
    );
    let cdroms_path = spec_path.child("cdroms");
    let cdroms = bounded(&mut out, &cdroms_path, &spec.cdroms, MAX_CDROMS);
    let is_disk = |name: &str| template_disk(name) || spec.disks.iter().any(|d| d.name == name);
    out.errors
        .extend(check_cdroms(&cdroms_path, cdroms, &is_disk));
    out.errors
        .extend(volumes::volume_count_error(spec, template));
    let networks_path = spec_path.child("networks");
    let networks = bounded(&mut out, &networks_path, &spec.networks, MAX_NETWORKS);
    validate_networks(&mut out, &networks_path, networks);
    let boot_path = spec_path.child("bootOrder");
    let boot_order = bounded(&mut out, &boot_path, &spec.boot_order, MAX_BOOT_ORDER);
    validate_boot_order(&mut out, &boot_path, boot_order, !spec.cdroms.is_empty());
    if let Some(ci) = &spec.cloud_init {
        validate_cloud_init(&mut out, &spec_path.child("cloudInit"), ci);
    }
    out.errors
        .extend(machine_type_errors(spec, catalog.machine_types()));
    if let Some(domain) = &spec.domain {
        validate_domain(&mut out, &spec_path.child("domain"), domain);
    }
    placement::validate(&mut out, &spec_path, spec);
    operations::validate(&mut out, &spec_path, spec);
    snapshots::validate(&mut out, &spec_path, spec);
    out.errors.extend(super::clones::errors(spec));
    out
}

pub(super) fn check_quantity(out: &mut Outcome, path: &FieldPath, q: &Quantity) -> Option<Amount> {
    match q.parse() {
        Ok(a) => Some(a),
        Err(e) => {
            out.errors
                .push(FieldError::invalid(path, q.as_str(), e.to_string()));
            None
        }
    }
}

fn push_all(out: &mut Outcome, path: &FieldPath, value: &str, messages: Vec<String>) {
    out.errors.extend(
        messages
            .into_iter()
            .map(|m| FieldError::invalid(path, value, m)),
    );
}

fn validate_disks(
    out: &mut Outcome,
    path: &FieldPath,
    disks: &[Disk],
    template_disk: &dyn Fn(&str) -> bool,
    template: Option<&str>,
) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, disk) in disks.iter().enumerate() {
        let p = path.index(i);
        let name_path = p.child("name");
        if disk.name.is_empty() {
            out.errors.push(FieldError::required(&name_path, ""));
        } else {
            push_all(out, &name_path, &disk.name, dns1123_label(&disk.name));
            if disk.name == CLOUD_INIT_VOLUME {
                out.errors.push(FieldError::invalid(
                    &name_path,
                    disk.name.as_str(),
                    "is reserved for the cloud-init volume",
                ));
            }
            if seen.insert(&disk.name, i).is_some() {
                out.errors
                    .push(FieldError::duplicate(&name_path, disk.name.as_str()));
            }
        }
        match &disk.size {
            Some(size) => {
                let size_path = p.child("size");
                if let Some(amount) = check_quantity(out, &size_path, size)
                    && let Some(problem) = claim_size_problem(amount)
                {
                    out.errors
                        .push(FieldError::invalid(&size_path, size.as_str(), problem));
                }
            }
            // A clone without a size takes its source's.
            None if disk.source.as_ref().is_some_and(|s| s.is_clone()) => {}
            None if !disk.name.is_empty() && !template_disk(&disk.name) => {
                let detail = match template {
                    Some(t) => format!(
                        "disk {:?} is not in template {t:?}, so it needs a size",
                        disk.name
                    ),
                    None => format!("disk {:?} needs a size", disk.name),
                };
                out.errors
                    .push(FieldError::required(&p.child("size"), detail));
            }
            None => {}
        }
        if let Some(sc) = &disk.storage_class {
            push_all(out, &p.child("storageClass"), sc, dns1123_subdomain(sc));
        }
        if let Some(source) = &disk.source {
            out.errors.extend(check_source(&p.child("source"), source));
        }
        check_enum(
            out,
            &p.child("accessMode"),
            disk.access_mode.as_deref(),
            ACCESS_MODES,
        );
        check_enum(
            out,
            &p.child("volumeMode"),
            disk.volume_mode.as_deref(),
            VOLUME_MODES,
        );
    }
}

fn check_enum(out: &mut Outcome, path: &FieldPath, value: Option<&str>, allowed: &[&str]) {
    if let Some(v) = value
        && !allowed.contains(&v)
    {
        out.errors.push(FieldError::not_supported(path, v, allowed));
    }
}

fn validate_boot_order(out: &mut Outcome, path: &FieldPath, order: &[String], has_cdrom: bool) {
    for (i, device) in order.iter().enumerate() {
        let p = path.index(i);
        if !BOOT_DEVICES.contains(&device.as_str()) {
            out.errors
                .push(FieldError::not_supported(&p, device.as_str(), BOOT_DEVICES));
        } else if order[..i].contains(device) {
            out.errors.push(FieldError::duplicate(&p, device.as_str()));
        } else if device == "cdrom" && !has_cdrom {
            out.warnings.push(format!(
                "{p}: \"cdrom\" is accepted but ignored: the Machine has no cdrom device"
            ));
        }
    }
}

fn validate_cloud_init(out: &mut Outcome, path: &FieldPath, ci: &CloudInit) {
    // User data is refused rather than carried through a Secret: `secretRef` is the way to
    // larger user data. Network data has no such field, so the reconciler carries it.
    if ci
        .user_data
        .as_ref()
        .is_some_and(|d| d.len() > MAX_USER_DATA)
    {
        out.errors
            .push(FieldError::too_long(&path.child("userData"), MAX_USER_DATA));
    }
    if ci
        .network_data
        .as_ref()
        .is_some_and(|d| d.len() > MAX_NETWORK_DATA)
    {
        out.errors.push(FieldError::too_long(
            &path.child("networkData"),
            MAX_NETWORK_DATA,
        ));
    }
    if let Some(r) = &ci.secret_ref {
        let p = path.child("secretRef");
        if r.name.is_empty() {
            out.errors.push(FieldError::required(
                &p.child("name"),
                "the name of a Secret in the Machine's namespace",
            ));
        } else {
            push_all(out, &p.child("name"), &r.name, dns1123_subdomain(&r.name));
        }
        if let Some(key) = &r.key {
            push_all(out, &p.child("key"), key, config_key(key));
        }
        if ci.user_data.is_some() {
            out.warnings.push(format!(
                "{path}: userData and secretRef are both set; the inline userData is used and secretRef is ignored"
            ));
        }
    }
}

fn validate_domain(out: &mut Outcome, path: &FieldPath, domain: &Domain) {
    let bootloader = domain.firmware.as_ref().and_then(|f| f.bootloader.as_ref());
    if let Some(bl) = bootloader
        && bl.secure_boot == Some(true)
        && bl.efi != Some(true)
    {
        let firmware_path = path.child("firmware");
        let bl_path = firmware_path.child("bootloader");
        out.errors.push(FieldError::invalid(
            &bl_path.child("secureBoot"),
            Value::Bool(true),
            format!("secure boot requires {} to be true", bl_path.child("efi")),
        ));
    }
    let machine_type = domain.machine.as_ref().and_then(|m| m.type_.as_deref());
    if bootloader.is_some_and(|bl| bl.secure_boot == Some(true))
        && machine_type.is_some_and(|t| t.starts_with("pc-i440fx"))
    {
        out.errors.push(FieldError::invalid(
            &path
                .child("firmware")
                .child("bootloader")
                .child("secureBoot"),
            Value::Bool(true),
            "secure boot requires a q35 machine type (KubeVirt refuses it with i440fx)",
        ));
    }
}

mod networks;
mod operations;
mod placement;
pub mod resources;
mod snapshots;
mod volumes;
pub use networks::MAX_NETWORK_NAME;
use networks::validate_networks;
pub use volumes::MAX_VOLUMES;

#[cfg(test)]
mod tests;
