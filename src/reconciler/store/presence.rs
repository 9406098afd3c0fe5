//! Which objects of one kind exist in scope, by name, whoever made them: how a reconcile tells
//! "absent" from "made by someone else" without a GET, since the full caches select by the
//! operator's label.
//!
//! Only presence is read, so a set of `namespace/name` keys is all that is kept (a reflector
//! store of metadata cost about 900 bytes per object; a key costs about 60).

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use kube::ResourceExt;
use kube::runtime::watcher;
use tokio::sync::watch;

#[derive(Clone)]
pub struct Presence {
    inner: Arc<RwLock<Inner>>,
    listed: watch::Sender<bool>,
}

#[derive(Default)]
struct Inner {
    names: HashSet<Box<str>>,
    /// The list in progress; it replaces `names` when complete (a re-list after a watch
    /// expired must also forget objects deleted meanwhile).
    listing: Option<HashSet<Box<str>>>,
}

impl Default for Presence {
    fn default() -> Self {
        Presence {
            inner: Arc::default(),
            listed: watch::Sender::new(false),
        }
    }
}

fn key(ns: &str, name: &str) -> Box<str> {
    format!("{ns}/{name}").into_boxed_str()
}

impl Presence {
    /// Whether an object named `name` exists in `ns`, as last seen by the watch.
    pub fn contains(&self, ns: &str, name: &str) -> bool {
        self.inner
            .read()
            .map(|i| i.names.contains(&key(ns, name)))
            // A poisoned lock knows nothing: say "maybe", so the caller asks the API server.
            .unwrap_or(true)
    }

    /// Resolves once the first list is complete; `Err` when the watch is gone.
    pub async fn wait_until_ready(&self) -> Result<(), watch::error::RecvError> {
        self.listed.subscribe().wait_for(|l| *l).await.map(drop)
    }

    /// Applies one watch event.
    pub fn apply<K: ResourceExt>(&self, event: watcher::Event<K>) {
        let Ok(mut inner) = self.inner.write() else {
            return;
        };
        let key_of = |o: &K| key(&o.namespace().unwrap_or_default(), &o.name_any());
        match event {
            watcher::Event::Apply(o) => {
                inner.names.insert(key_of(&o));
            }
            watcher::Event::Delete(o) => {
                inner.names.remove(&key_of(&o));
            }
            watcher::Event::Init => inner.listing = Some(HashSet::new()),
            watcher::Event::InitApply(o) => {
                inner.listing.get_or_insert_default().insert(key_of(&o));
            }
            watcher::Event::InitDone => {
                if let Some(listed) = inner.listing.take() {
                    inner.names = listed;
                }
                inner.names.shrink_to_fit();
                drop(inner);
                self.listed.send_replace(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use kube::core::ObjectMeta;

    fn claim(ns: &str, name: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn lists_then_follows_and_a_relist_forgets_what_went() {
        let p = Presence::default();
        p.apply(watcher::Event::<PersistentVolumeClaim>::Init);
        p.apply(watcher::Event::InitApply(claim("a", "x")));
        p.apply(watcher::Event::InitApply(claim("a", "y")));
        assert!(!p.contains("a", "x"), "not before the list completes");
        p.apply(watcher::Event::<PersistentVolumeClaim>::InitDone);
        p.wait_until_ready().await.unwrap();
        assert!(p.contains("a", "x") && p.contains("a", "y"));
        assert!(!p.contains("b", "x"), "namespaces are apart");

        p.apply(watcher::Event::Apply(claim("b", "x")));
        p.apply(watcher::Event::Delete(claim("a", "y")));
        assert!(p.contains("b", "x") && !p.contains("a", "y"));

        // A re-list that no longer has a/x drops it.
        p.apply(watcher::Event::<PersistentVolumeClaim>::Init);
        p.apply(watcher::Event::InitApply(claim("b", "x")));
        assert!(p.contains("a", "x"), "kept until the re-list completes");
        p.apply(watcher::Event::<PersistentVolumeClaim>::InitDone);
        assert!(!p.contains("a", "x") && p.contains("b", "x"));
    }
}
