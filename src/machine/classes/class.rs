//! A class as the rules use it: a checked MachineClass (or a built-in template) with its
//! defaults filled in, its limits parsed, and the record a Machine of it carries, made once.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;

use crate::api::hardware::{Device, Hugepages};
use crate::api::machine::{Cpu, Memory};
use crate::api::machine_class::{ClassDisk, ClassLimits, MachineClassSpec};
use crate::api::placement::Placement;
use crate::api::quantity::{Amount, Quantity};

use super::super::field_error::FieldError;
use super::super::templates::Template;
use super::check::check_class;

#[derive(Clone, Debug, PartialEq)]
pub struct Class {
    pub name: String,
    pub cores: i64,
    pub threads: i64,
    pub sockets: i64,
    pub memory: Quantity,
    /// Every disk has a size.
    pub disks: Vec<ClassDisk>,
    pub limits: Limits,
    /// What every Machine of the class gets on its VM beyond its size.
    pub hardware: Hardware,
    pub enabled: bool,
    pub default: bool,
    /// The Machine's `vitistack.io/machine-class` annotation for this class: the values and
    /// limits, without the presentation (displayName, description) or the admin's switches.
    pub record: String,
}

/// A class's hardware: devices, CPU pinning and model, hugepages, and where its Machines run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hardware {
    pub gpus: Vec<Device>,
    pub host_devices: Vec<Device>,
    pub dedicated: bool,
    pub model: Option<String>,
    pub page_size: Option<String>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

impl Hardware {
    fn from_spec(spec: &MachineClassSpec) -> Hardware {
        let cpu = spec.cpu.clone().unwrap_or_default();
        let placement = spec.placement.clone().unwrap_or_default();
        Hardware {
            gpus: spec.gpus.clone(),
            host_devices: spec.host_devices.clone(),
            dedicated: cpu.dedicated == Some(true),
            model: cpu.model,
            page_size: (spec.memory.as_ref())
                .and_then(|m| m.hugepages.as_ref())
                .and_then(|h| h.page_size.clone()),
            node_selector: placement.node_selector,
            tolerations: placement.tolerations,
        }
    }
}

/// The annotation's shape: the class's name and the spec fields that size and bound a Machine.
#[derive(Serialize, Deserialize)]
struct Record {
    name: String,
    #[serde(flatten)]
    spec: MachineClassSpec,
}

impl Class {
    /// The class a valid `spec` describes, else every problem with it.
    pub fn from_spec(name: &str, spec: &MachineClassSpec) -> Result<Class, Vec<FieldError>> {
        let errors = check_class(spec);
        if !errors.is_empty() {
            return Err(errors);
        }
        let cpu = spec.cpu.clone().unwrap_or_default();
        let memory = spec.memory.as_ref().and_then(|m| m.size.clone());
        let limits_spec = spec.limits.clone().unwrap_or_default();
        Ok(Class::new(ClassValues {
            name: name.to_owned(),
            cores: cpu.cores.unwrap_or(1),
            threads: cpu.threads.unwrap_or(1),
            sockets: cpu.sockets.unwrap_or(1),
            memory: memory.unwrap_or_else(|| Quantity::from("64Mi")),
            disks: spec.disks.clone(),
            limits: limits_spec,
            hardware: Hardware::from_spec(spec),
            enabled: spec.enabled != Some(false),
            default: spec.default == Some(true),
        }))
    }

    /// A compiled-in template as a class: enabled, no limits beyond the Machine API's.
    pub fn built_in(t: &Template) -> Class {
        Class::new(ClassValues {
            name: t.name.to_owned(),
            cores: t.cores,
            threads: t.threads,
            sockets: t.sockets,
            memory: t.memory(),
            disks: t
                .disks
                .iter()
                .map(|(name, size)| ClassDisk {
                    name: (*name).to_owned(),
                    size: Some(Quantity::from(*size)),
                    storage_class: None,
                })
                .collect(),
            limits: ClassLimits::default(),
            hardware: Hardware::default(),
            enabled: true,
            default: false,
        })
    }

    /// The class a Machine's record describes; none when it does not read as a valid class.
    pub fn from_record(record: &str) -> Option<Class> {
        let Record { name, spec } = serde_json::from_str(record).ok()?;
        Class::from_spec(&name, &spec).ok()
    }

    fn new(v: ClassValues) -> Class {
        let limits = Limits::from_spec(&v.limits);
        let hw = &v.hardware;
        let recorded = Record {
            name: v.name.clone(),
            spec: MachineClassSpec {
                cpu: Some(Cpu {
                    cores: Some(v.cores),
                    threads: Some(v.threads),
                    sockets: Some(v.sockets),
                    max_sockets: None,
                    dedicated: hw.dedicated.then_some(true),
                    model: hw.model.clone(),
                }),
                memory: Some(Memory {
                    size: Some(v.memory.clone()),
                    max_size: None,
                    hugepages: (hw.page_size.clone()).map(|p| Hugepages { page_size: Some(p) }),
                }),
                disks: v.disks.clone(),
                gpus: hw.gpus.clone(),
                host_devices: hw.host_devices.clone(),
                placement: (!hw.node_selector.is_empty() || !hw.tolerations.is_empty()).then(
                    || Placement {
                        node_selector: hw.node_selector.clone(),
                        tolerations: hw.tolerations.clone(),
                        ..Placement::default()
                    },
                ),
                limits: (v.limits != ClassLimits::default()).then_some(v.limits),
                ..MachineClassSpec::default()
            },
        };
        // Strings, integers, booleans and lists only: serialising cannot fail. An empty record would
        // only be ignored when read back (the class is then looked up by name).
        let record = serde_json::to_string(&recorded).unwrap_or_default();
        Class {
            name: v.name,
            cores: v.cores,
            threads: v.threads,
            sockets: v.sockets,
            memory: v.memory,
            disks: v.disks,
            limits,
            hardware: v.hardware,
            enabled: v.enabled,
            default: v.default,
            record,
        }
    }

    /// The class's disk of that name.
    pub fn disk(&self, name: &str) -> Option<&ClassDisk> {
        self.disks.iter().find(|d| d.name == name)
    }
}

struct ClassValues {
    name: String,
    cores: i64,
    threads: i64,
    sockets: i64,
    memory: Quantity,
    disks: Vec<ClassDisk>,
    limits: ClassLimits,
    hardware: Hardware,
    enabled: bool,
    default: bool,
}

/// The limits, parsed once when the class is made.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    pub max_cores: Option<i64>,
    pub max_threads: Option<i64>,
    pub max_sockets: Option<i64>,
    pub memory_min: Option<Bound>,
    pub memory_max: Option<Bound>,
    pub max_count: Option<usize>,
    pub max_size: Option<Bound>,
    pub allow_dedicated: bool,
    /// Models a Machine may name besides the class's own.
    pub models: Vec<String>,
}

/// A quantity bound: its value, and its text for messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    pub amount: Amount,
    pub text: Quantity,
}

impl Limits {
    /// From checked limits; a bound that does not parse (never, after [`super::check`]) is none.
    pub fn from_spec(l: &ClassLimits) -> Limits {
        let bound = |q: Option<&Quantity>| {
            let text = q?.clone();
            Some(Bound {
                amount: text.parse().ok()?,
                text,
            })
        };
        let cpu = l.cpu.clone().unwrap_or_default();
        let memory = l.memory.clone().unwrap_or_default();
        let disks = l.disks.clone().unwrap_or_default();
        Limits {
            max_cores: cpu.max_cores,
            max_threads: cpu.max_threads,
            max_sockets: cpu.max_sockets,
            memory_min: bound(memory.min.as_ref()),
            memory_max: bound(memory.max.as_ref()),
            max_count: disks.max_count.and_then(|n| usize::try_from(n).ok()),
            max_size: bound(disks.max_size.as_ref()),
            allow_dedicated: cpu.allow_dedicated == Some(true),
            models: cpu.models,
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}
