//! Class resolution: the class's values, the user's overrides field by field, disks merged by
//! name, and the field defaults. The result is what the mutating webhook stores.
//!
//! To re-derive template values when `spec.template` changes, the values this step filled in are
//! recorded in the annotation [`DEFAULTS_ANNOTATION`]. Before resolving again, every recorded value
//! that is still unchanged is taken back out ([`strip_defaults`]), which leaves exactly what the
//! user set; a value the user has since edited no longer matches and so stays theirs.

use crate::api::domain::{Domain, MachineType};
use crate::api::machine::{
    CloudInit, Cpu, Disk, MachineSpec, Memory, Network, Resources, SecretKeyRef,
};

use super::catalog::Catalog;
use super::classes::Class;
use super::machine_types::DEFAULT_MACHINE_TYPE;

/// Annotation holding the JSON of the spec values that came from the template, not from the user.
pub const DEFAULTS_ANNOTATION: &str = "vitistack.io/template-defaults";

/// A disk's modes where no StorageProfile says otherwise.
pub const DEFAULT_ACCESS_MODE: &str = "ReadWriteOnce";
pub const DEFAULT_VOLUME_MODE: &str = "Filesystem";
pub const DEFAULT_NIC_MODEL: &str = "virtio";
pub const DEFAULT_SECRET_KEY: &str = "userdata";

/// A resolved spec and the template-derived part of it (the annotation's content).
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub spec: MachineSpec,
    pub from_template: MachineSpec,
}

/// Resolves `spec` against the catalog's class of its template as it is now (enabled or not).
/// `recorded` is what an earlier resolution filled in. An unknown class contributes nothing;
/// validation reports it.
pub fn resolve(spec: &MachineSpec, recorded: Option<&MachineSpec>, catalog: &Catalog) -> Resolved {
    let name = spec
        .template
        .as_deref()
        .unwrap_or_else(|| catalog.default_name());
    resolve_in(spec, recorded, name, catalog.class(name))
}

/// Resolves `spec` against `class`, the class named `name` (see `classes::choose`).
pub fn resolve_in(
    spec: &MachineSpec,
    recorded: Option<&MachineSpec>,
    name: &str,
    class: Option<&Class>,
) -> Resolved {
    let explicit = match recorded {
        Some(r) => strip_defaults(spec, r),
        None => spec.clone(),
    };
    let mut from_template = MachineSpec::default();
    // A defaulted class name is stored like one the user chose: changing the default affects
    // new Machines only, never resizes existing ones (Kubernetes' own rule for defaults).
    let resources = resolve_resources(explicit.resources.as_ref(), class, &mut from_template);
    let disks = resolve_disks(&explicit.disks, class, &mut from_template);

    let resolved = MachineSpec {
        template: Some(name.to_owned()),
        resources,
        disks,
        networks: explicit.networks.iter().map(default_network).collect(),
        cdroms: explicit.cdroms.clone(),
        boot_order: explicit.boot_order.clone(),
        cloud_init: explicit.cloud_init.as_ref().map(default_cloud_init),
        domain: Some(default_domain(explicit.domain.as_ref())),
        // `running` defaults only where no run strategy says what to do.
        running: match explicit.run_strategy {
            None => Some(explicit.running.unwrap_or(true)),
            Some(_) => explicit.running,
        },
        run_strategy: explicit.run_strategy.clone(),
        // Cluster policy, applied by the reconciler when unset (like KubeVirt's own default):
        // changing --default-eviction-strategy reaches every Machine that did not choose.
        eviction_strategy: explicit.eviction_strategy.clone(),
        placement: explicit.placement.clone(),
        // Refused by validation (devices are the class's), kept so the refusal can name them.
        gpus: explicit.gpus.clone(),
        host_devices: explicit.host_devices.clone(),
        update_strategy: explicit.update_strategy.clone(),
        snapshots: explicit.snapshots.clone(),
        clone_from: explicit.clone_from.clone(),
    };
    Resolved {
        spec: resolved,
        from_template,
    }
}

fn resolve_resources(
    explicit: Option<&Resources>,
    class: Option<&Class>,
    record: &mut MachineSpec,
) -> Option<Resources> {
    let cpu = explicit.and_then(|r| r.cpu.clone()).unwrap_or_default();
    let memory = explicit
        .and_then(|r| r.memory.as_ref())
        .and_then(|m| m.size.clone());
    let Some(t) = class else {
        return explicit.cloned();
    };
    let mut recorded_cpu = Cpu::default();
    let pick = |value: Option<i64>, from_t: i64, slot: &mut Option<i64>| {
        value.unwrap_or_else(|| {
            *slot = Some(from_t);
            from_t
        })
    };
    let resolved_cpu = Cpu {
        cores: Some(pick(cpu.cores, t.cores, &mut recorded_cpu.cores)),
        threads: Some(pick(cpu.threads, t.threads, &mut recorded_cpu.threads)),
        sockets: Some(pick(cpu.sockets, t.sockets, &mut recorded_cpu.sockets)),
        max_sockets: cpu.max_sockets,
        // The Machine's own only (the class's reach the VM from its record); the class's
        // limits decide whether they are allowed.
        dedicated: cpu.dedicated,
        model: cpu.model.clone(),
    };
    let size = memory.unwrap_or_else(|| {
        record
            .resources
            .get_or_insert_with(Resources::default)
            .memory = Some(Memory {
            size: Some(t.memory.clone()),
            ..Memory::default()
        });
        t.memory.clone()
    });
    if recorded_cpu != Cpu::default() {
        record.resources.get_or_insert_with(Resources::default).cpu = Some(recorded_cpu);
    }
    Some(Resources {
        cpu: Some(resolved_cpu),
        memory: Some(Memory {
            size: Some(size),
            max_size: explicit
                .and_then(|r| r.memory.as_ref())
                .and_then(|m| m.max_size.clone()),
            // Refused by validation (a class's field), kept so the refusal can name it.
            hugepages: explicit
                .and_then(|r| r.memory.as_ref())
                .and_then(|m| m.hugepages.clone()),
        }),
    })
}

/// The class's disks first, in its order, each overlaid with the user's disk of the same name;
/// then the user's other disks in their order.
fn resolve_disks(explicit: &[Disk], class: Option<&Class>, record: &mut MachineSpec) -> Vec<Disk> {
    let class_disks = class.map(|c| c.disks.as_slice()).unwrap_or_default();
    let mut out = Vec::with_capacity(class_disks.len() + explicit.len());
    for from_class in class_disks {
        let name = &from_class.name;
        let user = explicit.iter().find(|d| d.name == *name);
        let mut recorded = Disk {
            name: name.clone(),
            ..Disk::default()
        };
        // A clone without a size takes its source's size (CDI detects it), not the class's.
        let clone = user.is_some_and(|d| d.source.as_ref().is_some_and(|s| s.is_clone()));
        let size = match user.and_then(|d| d.size.clone()) {
            Some(size) => Some(size),
            None if clone => None,
            None => {
                recorded.size.clone_from(&from_class.size);
                from_class.size.clone()
            }
        };
        let storage_class = match user.and_then(|d| d.storage_class.clone()) {
            Some(sc) => Some(sc),
            None => {
                recorded.storage_class.clone_from(&from_class.storage_class);
                from_class.storage_class.clone()
            }
        };
        let mut disk = default_disk(&Disk {
            size,
            storage_class,
            ..user.cloned().unwrap_or_else(|| recorded.clone())
        });
        disk.name = name.clone();
        if user.is_none() {
            // The whole entry came from the class, field defaults included.
            recorded = disk.clone();
        }
        if recorded.size.is_some() || recorded.storage_class.is_some() || user.is_none() {
            record.disks.push(recorded);
        }
        out.push(disk);
    }
    out.extend(
        explicit
            .iter()
            .filter(|d| !class_disks.iter().any(|c| c.name == d.name))
            .map(default_disk),
    );
    out
}

/// Modes are left as given: the reconciler picks them from the class's StorageProfile
/// (`reconciler::decide::storage_defaults`), where a webhook has no view of it.
fn default_disk(d: &Disk) -> Disk {
    d.clone()
}

fn default_network(n: &Network) -> Network {
    Network {
        model: Some(
            n.model
                .clone()
                .unwrap_or_else(|| DEFAULT_NIC_MODEL.to_owned()),
        ),
        ..n.clone()
    }
}

fn default_cloud_init(c: &CloudInit) -> CloudInit {
    CloudInit {
        secret_ref: c.secret_ref.as_ref().map(|r| SecretKeyRef {
            name: r.name.clone(),
            key: Some(
                r.key
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SECRET_KEY.to_owned()),
            ),
        }),
        ..c.clone()
    }
}

fn default_domain(d: Option<&Domain>) -> Domain {
    let d = d.cloned().unwrap_or_default();
    let type_ = d
        .machine
        .as_ref()
        .and_then(|m| m.type_.clone())
        .unwrap_or_else(|| DEFAULT_MACHINE_TYPE.to_owned());
    Domain {
        machine: Some(MachineType { type_: Some(type_) }),
        ..d
    }
}

/// Takes back out every recorded template value that is still unchanged in `spec`.
pub fn strip_defaults(spec: &MachineSpec, recorded: &MachineSpec) -> MachineSpec {
    let mut out = spec.clone();
    if let (Some(res), Some(rec)) = (out.resources.as_mut(), recorded.resources.as_ref()) {
        if let (Some(cpu), Some(rec_cpu)) = (res.cpu.as_mut(), rec.cpu.as_ref()) {
            unset_if_same(&mut cpu.cores, &rec_cpu.cores);
            unset_if_same(&mut cpu.threads, &rec_cpu.threads);
            unset_if_same(&mut cpu.sockets, &rec_cpu.sockets);
            if *cpu == Cpu::default() {
                res.cpu = None;
            }
        }
        if let (Some(mem), Some(rec_mem)) = (res.memory.as_mut(), rec.memory.as_ref()) {
            unset_if_same(&mut mem.size, &rec_mem.size);
            // Only an empty entry goes: the Machine's own maxSize and hugepages stay its own.
            if *mem == Memory::default() {
                res.memory = None;
            }
        }
        if res.cpu.is_none() && res.memory.is_none() {
            out.resources = None;
        }
    }
    out.disks.retain_mut(|disk| {
        let Some(rec) = recorded.disks.iter().find(|r| r.name == disk.name) else {
            return true;
        };
        unset_if_same(&mut disk.size, &rec.size);
        unset_if_same(&mut disk.storage_class, &rec.storage_class);
        // Modes an earlier version defaulted stay: the claim was made with them, and they are
        // immutable (a new disk without modes gets the StorageProfile's from the reconciler).
        // A disk left with only its name came from the template as a whole.
        *disk
            != Disk {
                name: disk.name.clone(),
                ..Disk::default()
            }
    });
    out
}

fn unset_if_same<T: PartialEq>(value: &mut Option<T>, recorded: &Option<T>) {
    if recorded.is_some() && value == recorded {
        *value = None;
    }
}

#[cfg(test)]
mod tests;
