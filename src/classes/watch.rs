//! The watch on MachineClasses that feeds a [`LiveCatalog`]. A (re)list is buffered and put in
//! force whole when it completes, so a snapshot never holds half a list.

use std::collections::BTreeMap;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, ResourceExt};

use crate::api::MachineClass;

use super::LiveCatalog;

/// The classes as the watch has told them so far.
#[derive(Default)]
pub struct Listed {
    current: BTreeMap<String, MachineClass>,
    /// A list in progress, put in force on `InitDone`.
    pending: Option<BTreeMap<String, MachineClass>>,
}

impl Listed {
    /// Applies one event; true when the classes in force changed (or were first listed).
    pub fn apply(&mut self, event: Event<MachineClass>) -> bool {
        match event {
            Event::Init => {
                self.pending = Some(BTreeMap::new());
                false
            }
            Event::InitApply(c) => {
                self.pending
                    .get_or_insert_with(BTreeMap::new)
                    .insert(c.name_any(), c);
                false
            }
            Event::InitDone => {
                self.current = self.pending.take().unwrap_or_default();
                true
            }
            Event::Apply(c) => {
                self.current.insert(c.name_any(), c);
                true
            }
            Event::Delete(c) => {
                self.current.remove(&c.name_any());
                true
            }
        }
    }

    pub fn objects(&self) -> Vec<MachineClass> {
        self.current.values().cloned().collect()
    }
}

/// Follows every MachineClass into `live` until the task is dropped. Without the MachineClass
/// CRD (an upgrade that kept the old CRDs: Helm never upgrades them) the built-ins alone are put
/// in force, and the watch keeps retrying, so classes work once the CRD is applied.
pub async fn follow(client: Client, live: LiveCatalog) {
    let api: Api<MachineClass> = Api::all(client);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listed = Listed::default();
    let mut shown: Vec<String> = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                if listed.apply(event) {
                    let warnings = live.publish(&listed.objects());
                    if warnings != shown {
                        for w in &warnings {
                            tracing::warn!(warning = %w, "MachineClass");
                        }
                        shown = warnings;
                    }
                }
            }
            Err(watcher::Error::InitialListFailed(kube::Error::Api(e))) if e.code == 404 => {
                if !live.loaded() {
                    tracing::warn!(
                        "the MachineClass CRD is not installed: only the built-in classes small, medium and large (apply manifests/crds.yaml)"
                    );
                    live.publish(&[]);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching MachineClasses failed; retrying");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachineClassSpec;

    fn class(name: &str) -> MachineClass {
        MachineClass::new(name, MachineClassSpec::default())
    }

    fn names(l: &Listed) -> Vec<String> {
        l.objects().iter().map(|c| c.name_any()).collect()
    }

    #[test]
    fn a_list_is_put_in_force_whole_and_events_after_it_one_by_one() {
        let mut l = Listed::default();
        for (event, changed, after) in [
            (Event::Init, false, vec![]),
            (Event::InitApply(class("a")), false, vec![]),
            (Event::InitApply(class("b")), false, vec![]),
            (Event::InitDone, true, vec!["a", "b"]),
            (Event::Apply(class("c")), true, vec!["a", "b", "c"]),
            (Event::Delete(class("a")), true, vec!["b", "c"]),
            // A relist replaces everything: "b" went while the watch was down.
            (Event::Init, false, vec!["b", "c"]),
            (Event::InitApply(class("c")), false, vec!["b", "c"]),
            (Event::InitDone, true, vec!["c"]),
            // An empty list is a list too (every class deleted, or none yet).
            (Event::Init, false, vec!["c"]),
            (Event::InitDone, true, vec![]),
        ] {
            assert_eq!(l.apply(event), changed);
            assert_eq!(names(&l), after);
        }
    }
}
