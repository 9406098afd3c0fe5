//! The built-in size templates (SPEC.md, "Templates") and which one applies when none is named.

use super::machine_types::MachineTypes;
use super::network_policy::NetworkPolicy;
use crate::api::placement::DEFAULT_EVICTION_STRATEGY;

use crate::api::Quantity;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pub name: &'static str,
    pub cores: i64,
    pub threads: i64,
    pub sockets: i64,
    pub memory: &'static str,
    /// Disks as (name, size); the template sets no StorageClass (the cluster default applies).
    pub disks: &'static [(&'static str, &'static str)],
}

impl Template {
    pub fn memory(&self) -> Quantity {
        Quantity::from(self.memory)
    }
}

pub const BUILT_IN: &[Template] = &[
    Template {
        name: "small",
        cores: 1,
        threads: 1,
        sockets: 1,
        memory: "2Gi",
        disks: &[("root", "20Gi")],
    },
    Template {
        name: "medium",
        cores: 2,
        threads: 1,
        sockets: 1,
        memory: "4Gi",
        disks: &[("root", "40Gi")],
    },
    Template {
        name: "large",
        cores: 4,
        threads: 1,
        sockets: 1,
        memory: "8Gi",
        disks: &[("root", "80Gi")],
    },
];

pub const DEFAULT_TEMPLATE: &str = "medium";

/// What the admin lets Machines ask for: the templates in force and the default one (checked at
/// start-up), the machine types KubeVirt accepts, and the bridges and VLANs networks may use.
#[derive(Clone, Debug)]
pub struct Catalog {
    templates: &'static [Template],
    default: &'static Template,
    machine_types: MachineTypes,
    networks: NetworkPolicy,
    /// What a Machine without `evictionStrategy` gets (`--default-eviction-strategy`).
    eviction_strategy: String,
}

#[derive(Debug, thiserror::Error)]
#[error("default template {0:?} is not one of: small, medium, large")]
pub struct UnknownDefaultTemplate(pub String);

impl Catalog {
    pub fn with_default(name: &str) -> Result<Self, UnknownDefaultTemplate> {
        let default = BUILT_IN
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| UnknownDefaultTemplate(name.to_owned()))?;
        Ok(Catalog {
            templates: BUILT_IN,
            default,
            machine_types: MachineTypes::default(),
            networks: NetworkPolicy::default(),
            eviction_strategy: DEFAULT_EVICTION_STRATEGY.to_owned(),
        })
    }

    pub fn with_eviction_strategy(mut self, strategy: &str) -> Self {
        strategy.clone_into(&mut self.eviction_strategy);
        self
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

    pub fn get(&self, name: &str) -> Option<&'static Template> {
        self.templates.iter().find(|t| t.name == name)
    }

    pub fn default_template(&self) -> &'static Template {
        self.default
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.templates.iter().map(|t| t.name).collect()
    }
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            templates: BUILT_IN,
            default: &BUILT_IN[1],
            machine_types: MachineTypes::default(),
            networks: NetworkPolicy::default(),
            eviction_strategy: DEFAULT_EVICTION_STRATEGY.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_spec() {
        let c = Catalog::default();
        let t = |n| c.get(n).unwrap();
        assert_eq!(
            (t("small").cores, t("small").memory, t("small").disks),
            (1, "2Gi", &[("root", "20Gi")][..])
        );
        assert_eq!(
            (t("medium").cores, t("medium").memory, t("medium").disks),
            (2, "4Gi", &[("root", "40Gi")][..])
        );
        assert_eq!(
            (t("large").cores, t("large").memory, t("large").disks),
            (4, "8Gi", &[("root", "80Gi")][..])
        );
        for tpl in BUILT_IN {
            assert_eq!((tpl.threads, tpl.sockets), (1, 1));
        }
        assert_eq!(c.default_template().name, DEFAULT_TEMPLATE);
        assert!(c.get("huge").is_none());
    }

    #[test]
    fn default_is_configurable_but_must_exist() {
        assert_eq!(
            Catalog::with_default("large")
                .unwrap()
                .default_template()
                .name,
            "large"
        );
        let err = Catalog::with_default("huge").unwrap_err();
        assert!(err.to_string().contains("\"huge\""));
    }
}
