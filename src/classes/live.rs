//! The current catalog, shared read-mostly: readers take the snapshot with one atomic load (no
//! lock, no allocation), the one watch task replaces it whole.

use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};

use crate::api::MachineClass;
use crate::machine::Catalog;

#[derive(Clone, Debug)]
pub struct LiveCatalog {
    current: Arc<ArcSwap<Catalog>>,
}

impl LiveCatalog {
    /// A catalog that never changes (no cluster: the `webhook` and `validate` commands, tests).
    pub fn fixed(catalog: Catalog) -> Self {
        LiveCatalog {
            current: Arc::new(ArcSwap::from_pointee(catalog)),
        }
    }

    /// `base` (flags: default template, machine types, networks) waiting for its MachineClasses:
    /// not [`Catalog::loaded`] until [`LiveCatalog::publish`] first runs.
    pub fn watched(base: Catalog) -> Self {
        Self::fixed(base.unloaded())
    }

    /// The snapshot in force, for one request.
    pub fn load(&self) -> Guard<Arc<Catalog>> {
        self.current.load()
    }

    /// The snapshot in force, to keep across awaits.
    pub fn load_full(&self) -> Arc<Catalog> {
        self.current.load_full()
    }

    /// Puts `objects` (every MachineClass there is) in force; returns what is wrong with them.
    pub fn publish(&self, objects: &[MachineClass]) -> Vec<String> {
        let (next, warnings) = self.current.load().with_class_objects(objects);
        self.current.store(Arc::new(next));
        warnings
    }

    pub fn loaded(&self) -> bool {
        self.current.load().loaded()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachineClassSpec;

    #[test]
    fn a_published_class_is_in_the_next_snapshot_and_the_old_one_is_unchanged() {
        let live = LiveCatalog::watched(Catalog::default());
        assert!(!live.loaded());
        let before = live.load_full();
        let spec: MachineClassSpec = serde_json::from_value(serde_json::json!({
            "cpu": {"cores": 8}, "memory": {"size": "32Gi"}
        }))
        .expect("spec");
        let warnings = live.publish(&[MachineClass::new("xlarge", spec)]);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(live.loaded());
        assert_eq!(live.load().class("xlarge").map(|c| c.cores), Some(8));
        assert!(
            before.class("xlarge").is_none(),
            "a snapshot taken stays as it was"
        );
        live.publish(&[]);
        assert!(live.load().class("xlarge").is_none());
        assert!(live.load().class("medium").is_some());
    }
}
