//! The KubeVirt VirtualMachine for a resolved Machine spec.

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::api::Machine;
use crate::api::domain::Domain;
use crate::api::machine::MachineSpec;
use crate::api::operations::run_strategy;
use crate::api::placement::EVICTION_NONE;
use crate::machine::classes::Hardware;
use crate::machine::machine_types::DEFAULT_MACHINE_TYPE;
use crate::reconciler::CLOUD_INIT_VOLUME;
use crate::reconciler::apis::kubevirt::{
    Bootloader, Cpu, Devices, Disk, DiskTarget, DomainSpec, Efi, FeatureState, Features, Firmware,
    HyperV, Interface, MachineType, Memory, Network, Spinlocks, TemplateMetadata, VirtualMachine,
    VirtualMachineSpec, VmiSpec, VmiTemplate, Volume,
};

use super::datavolume;
use super::hardware;
use super::meta::{machine_labels, owned_by_machine};

pub const DISK_BUS: &str = "virtio";
/// The spinlock retry count KubeVirt's Windows templates use.
const HYPERV_SPINLOCKS: u32 = 8191;

/// The operator's settings the VM follows.
pub struct Settings<'a> {
    /// `--default-eviction-strategy`.
    pub eviction_strategy: &'a str,
    /// `--propagate-label-prefixes`.
    pub label_prefixes: &'a [String],
    /// The Machine's class's hardware (as recorded in the Machine).
    pub hardware: &'a Hardware,
}

pub fn vm(
    machine: &Machine,
    spec: &MachineSpec,
    (interfaces, networks): (Vec<Interface>, Vec<Network>),
    cloud_init: Option<Volume>,
    settings: &Settings,
) -> VirtualMachine {
    let name = machine.name_any();
    let devices = spec.disks.len() + spec.cdroms.len() + 1;
    let mut disks: Vec<Disk> = Vec::with_capacity(devices);
    let mut volumes: Vec<Volume> = Vec::with_capacity(devices);
    for d in &spec.disks {
        disks.push(virtio_disk(&d.name));
        volumes.push(datavolume::disk_volume(&name, d));
    }
    let (mut cdroms, cdrom_volumes): (Vec<Disk>, Vec<Volume>) = spec
        .cdroms
        .iter()
        .map(|c| datavolume::cdrom(&name, c))
        .unzip();
    let mut interfaces = interfaces;
    apply_boot_order(&spec.boot_order, &mut disks, &mut cdroms, &mut interfaces);
    disks.extend(cdroms);
    volumes.extend(cdrom_volumes);
    if let Some(v) = cloud_init {
        disks.push(virtio_disk(CLOUD_INIT_VOLUME));
        volumes.push(v);
    }

    let cpu = spec.resources.as_ref().and_then(|r| r.cpu.as_ref());
    let memory = spec.resources.as_ref().and_then(|r| r.memory.as_ref());
    let domain = spec.domain.clone().unwrap_or_default();
    let placement = spec.placement.clone().unwrap_or_default();

    let labels = propagated_labels(machine, settings.label_prefixes);
    let mut metadata = owned_by_machine(machine, name.clone());
    if let Some(own) = metadata.labels.as_mut() {
        own.extend(labels.clone());
    }
    let mut vm = VirtualMachine {
        metadata,
        spec: VirtualMachineSpec {
            run_strategy: Some(run_strategy(spec.run_strategy.as_deref(), spec.running).to_owned()),
            template: VmiTemplate {
                metadata: Some(TemplateMetadata {
                    labels: {
                        let mut own = machine_labels(&name);
                        own.extend(labels);
                        own
                    },
                }),
                spec: VmiSpec {
                    domain: DomainSpec {
                        cpu: cpu.map(|c| Cpu {
                            cores: c.cores.and_then(to_u32),
                            threads: c.threads.and_then(to_u32),
                            sockets: c.sockets.and_then(to_u32),
                            max_sockets: c.max_sockets.and_then(to_u32),
                            ..Cpu::default()
                        }),
                        memory: memory.filter(|m| m.size.is_some()).map(|m| Memory {
                            guest: m.size.as_ref().map(|q| q.0.clone()),
                            max_guest: m.max_size.as_ref().map(|q| q.0.clone()),
                            ..Memory::default()
                        }),
                        machine: Some(MachineType {
                            type_: Some(kubevirt_machine_type(&domain)),
                        }),
                        features: features(&domain),
                        firmware: firmware(&domain),
                        devices: Devices {
                            disks,
                            interfaces,
                            ..Devices::default()
                        },
                    },
                    networks,
                    volumes,
                    eviction_strategy: eviction_strategy(spec, settings.eviction_strategy),
                    node_selector: hardware::node_selector(
                        placement.node_selector,
                        &settings.hardware.node_selector,
                    ),
                    affinity: placement.affinity,
                    tolerations: hardware::tolerations(
                        placement.tolerations,
                        &settings.hardware.tolerations,
                    ),
                    priority_class_name: placement.priority_class_name,
                },
            },
        },
        status: None,
    };
    hardware::apply(&mut vm.spec.template.spec.domain, cpu, settings.hardware);
    vm
}

/// The Machine's labels under one of `prefixes`, except the operator's own label keys (a Machine
/// label never replaces one the operator sets).
fn propagated_labels(machine: &Machine, prefixes: &[String]) -> BTreeMap<String, String> {
    if prefixes.is_empty() {
        return BTreeMap::new();
    }
    let own = machine_labels("");
    machine
        .labels()
        .iter()
        .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p.as_str())))
        .filter(|(k, _)| !own.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The Machine's strategy, else the operator's default; `None` leaves the VM's field unset, so
/// KubeVirt's cluster-wide default applies.
fn eviction_strategy(spec: &MachineSpec, default: &str) -> Option<String> {
    let strategy = spec.eviction_strategy.as_deref().unwrap_or(default);
    (strategy != EVICTION_NONE).then(|| strategy.to_owned())
}

fn virtio_disk(name: &str) -> Disk {
    Disk {
        name: name.to_owned(),
        disk: Some(DiskTarget {
            bus: Some(DISK_BUS.to_owned()),
        }),
        ..Disk::default()
    }
}

fn to_u32(v: i64) -> Option<u32> {
    u32::try_from(v).ok()
}

/// The machine type as KubeVirt gets it (what `--allowed-machine-types` is matched against).
pub fn kubevirt_machine_type(domain: &Domain) -> String {
    let t = domain
        .machine
        .as_ref()
        .and_then(|m| m.type_.as_deref())
        .unwrap_or(DEFAULT_MACHINE_TYPE);
    crate::machine::machine_types::kubevirt_name(t).to_owned()
}

/// Only what the Machine sets is written; KubeVirt's defaults stand for the rest.
fn features(domain: &Domain) -> Option<Features> {
    let f = domain.features.clone().unwrap_or_default();
    let secure_boot = secure_boot(domain);
    let out = Features {
        acpi: f.acpi.map(enabled),
        apic: f.apic.map(enabled),
        hyperv: f.hyperv.filter(|on| *on).map(|_| HyperV {
            relaxed: Some(enabled(true)),
            vapic: Some(enabled(true)),
            spinlocks: Some(Spinlocks {
                enabled: Some(true),
                spinlocks: Some(HYPERV_SPINLOCKS),
            }),
        }),
        smm: secure_boot.then(|| enabled(true)),
    };
    (out != Features::default()).then_some(out)
}

fn enabled(on: bool) -> FeatureState {
    FeatureState { enabled: Some(on) }
}

fn secure_boot(domain: &Domain) -> bool {
    let b = domain.firmware.as_ref().and_then(|f| f.bootloader.as_ref());
    b.is_some_and(|b| b.efi == Some(true) && b.secure_boot == Some(true))
}

/// EFI when asked for, with Secure Boot always explicit (KubeVirt's default for it is on).
fn firmware(domain: &Domain) -> Option<Firmware> {
    let efi = domain
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref())
        .is_some_and(|b| b.efi == Some(true));
    efi.then(|| Firmware {
        bootloader: Some(Bootloader {
            efi: Some(Efi {
                secure_boot: Some(secure_boot(domain)),
            }),
        }),
    })
}

/// Numbers devices in the Machine's boot order: each `disk` entry covers the Machine's disks in
/// order, `cdrom` its CD-ROMs, `network` its interfaces. With no boot order, KubeVirt's own
/// default applies (no device numbered).
fn apply_boot_order(
    order: &[String],
    disks: &mut [Disk],
    cdroms: &mut [Disk],
    interfaces: &mut [Interface],
) {
    let mut next = 1u32;
    for device in order {
        match device.as_str() {
            "disk" | "cdrom" => {
                let drives = if device == "disk" {
                    &mut *disks
                } else {
                    &mut *cdroms
                };
                for d in drives.iter_mut() {
                    d.boot_order = Some(next);
                    next += 1;
                }
            }
            "network" => {
                for i in interfaces.iter_mut() {
                    i.boot_order = Some(next);
                    next += 1;
                }
            }
            _ => {}
        }
    }
}

/// Whether `vm` takes its cloud-init user data from Secret `secret`.
pub fn references_secret(vm: &VirtualMachine, secret: &str) -> bool {
    vm.spec.template.spec.volumes.iter().any(|v| {
        v.cloud_init_no_cloud.as_ref().is_some_and(|c| {
            [&c.user_data_secret_ref, &c.network_data_secret_ref]
                .into_iter()
                .flatten()
                .any(|r| r.name == secret)
        })
    })
}
