//! What the admin lets Machines ask for: the classes in force and the default one, the machine
//! types KubeVirt accepts, the bridges and VLANs networks may use, and the default eviction
//! strategy. A value: the webhooks and
//! the reconciler read one snapshot per request (`crate::classes` publishes a new one whenever
//! the MachineClasses change).

use std::sync::Arc;

use crate::api::MachineClass;
use crate::api::placement::DEFAULT_EVICTION_STRATEGY;

use super::classes::{Class, Classes, Lookup};
use super::machine_types::MachineTypes;
use super::network_policy::NetworkPolicy;
use super::templates::{BUILT_IN, DEFAULT_TEMPLATE};

#[derive(Clone, Debug)]
pub struct Catalog {
    classes: Arc<Classes>,
    /// `--default-template`: the default while no class is marked default.
    default_template: &'static str,
    /// False until the MachineClass objects were read (a watched catalog's first list).
    loaded: bool,
    machine_types: MachineTypes,
    networks: NetworkPolicy,
    /// What a Machine without `evictionStrategy` gets (`--default-eviction-strategy`).
    eviction_strategy: String,
    /// What the operator does when a drain asks an `External` VM to leave (`--external-eviction`).
    external_eviction: ExternalEviction,
    /// Machine label keys starting with one of these are copied to the VM
    /// (`--propagate-label-prefixes`).
    label_prefixes: Vec<String>,
}

/// What the operator does when a node drain asks the VM of an `External` eviction strategy to
/// leave (`--external-eviction`); see `reconciler::decide::eviction`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ExternalEviction {
    /// `EvictionRequested` and a Warning Event: someone else moves the VM.
    #[default]
    Notify,
    /// The VM is stopped and started (its VMI deleted): the scheduler places it elsewhere.
    Restart,
}

#[derive(Debug, thiserror::Error)]
#[error("default template {0:?} is not one of: small, medium, large")]
pub struct UnknownDefaultTemplate(pub String);

impl Catalog {
    /// The built-in classes with `name` (one of them) as the default.
    pub fn with_default(name: &str) -> Result<Self, UnknownDefaultTemplate> {
        let default = BUILT_IN
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| UnknownDefaultTemplate(name.to_owned()))?;
        Ok(Catalog {
            default_template: default.name,
            ..Catalog::default()
        })
    }

    pub fn with_eviction_strategy(mut self, strategy: &str) -> Self {
        strategy.clone_into(&mut self.eviction_strategy);
        self
    }

    pub fn with_external_eviction(mut self, action: ExternalEviction) -> Self {
        self.external_eviction = action;
        self
    }

    /// What the operator does when a drain asks an `External` VM to leave.
    pub fn external_eviction(&self) -> ExternalEviction {
        self.external_eviction
    }

    pub fn with_label_prefixes(mut self, prefixes: Vec<String>) -> Self {
        self.label_prefixes = prefixes;
        self
    }

    /// The prefixes of the Machine labels the VM and its template carry too.
    pub fn label_prefixes(&self) -> &[String] {
        &self.label_prefixes
    }

    /// The eviction strategy of a Machine that sets none; `None` leaves KubeVirt's own default.
    pub fn eviction_strategy(&self) -> &str {
        &self.eviction_strategy
    }

    pub fn with_machine_types(mut self, machine_types: MachineTypes) -> Self {
        self.machine_types = machine_types;
        self
    }

    pub fn machine_types(&self) -> &MachineTypes {
        &self.machine_types
    }

    pub fn with_networks(mut self, networks: NetworkPolicy) -> Self {
        self.networks = networks;
        self
    }

    pub fn networks(&self) -> &NetworkPolicy {
        &self.networks
    }

    /// This catalog with the built-ins overlaid by `objects` (every MachineClass there is), and
    /// what is wrong with them.
    pub fn with_class_objects(&self, objects: &[MachineClass]) -> (Self, Vec<String>) {
        let (classes, warnings) = Classes::with_objects(objects);
        let catalog = Catalog {
            classes: Arc::new(classes),
            loaded: true,
            ..self.clone()
        };
        (catalog, warnings)
    }

    /// This catalog before its MachineClasses are read: Machines are refused meanwhile.
    pub fn unloaded(mut self) -> Self {
        self.loaded = false;
        self
    }

    pub fn loaded(&self) -> bool {
        self.loaded
    }

    pub fn classes(&self) -> &Classes {
        &self.classes
    }

    /// The usable class of that name, enabled or not.
    pub fn class(&self, name: &str) -> Option<&Class> {
        match self.classes.lookup(name) {
            Lookup::Found(c) => Some(c),
            _ => None,
        }
    }

    /// The class of Machines that name none: the one marked default, else `--default-template`.
    pub fn default_name(&self) -> &str {
        self.classes
            .marked_default()
            .unwrap_or(self.default_template)
    }
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            classes: Arc::new(Classes::built_in()),
            default_template: DEFAULT_TEMPLATE,
            loaded: true,
            machine_types: MachineTypes::default(),
            networks: NetworkPolicy::default(),
            eviction_strategy: DEFAULT_EVICTION_STRATEGY.to_owned(),
            external_eviction: ExternalEviction::default(),
            label_prefixes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_configurable_but_must_be_built_in() {
        assert_eq!(Catalog::default().default_name(), "medium");
        assert_eq!(
            Catalog::with_default("large").unwrap().default_name(),
            "large"
        );
        let err = Catalog::with_default("huge").unwrap_err();
        assert!(err.to_string().contains("\"huge\""));
        for t in BUILT_IN {
            let class = Catalog::default().class(t.name).cloned().unwrap();
            assert_eq!((class.cores, class.memory.as_str()), (t.cores, t.memory));
        }
    }
}
