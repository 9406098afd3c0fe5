//! The built-in size templates (SPEC.md, "Templates"): the classes every cluster has with no
//! MachineClass object, and the default one. A MachineClass of the same name replaces one
//! (`super::classes`).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_spec() {
        let t = |n| BUILT_IN.iter().find(|t| t.name == n).unwrap();
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
        assert_eq!(BUILT_IN.len(), 3);
        assert_eq!(DEFAULT_TEMPLATE, "medium");
    }
}
