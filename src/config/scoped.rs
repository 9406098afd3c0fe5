//! One watch per namespace of a [`WatchScope`] (one for all namespaces), merged into one stream
//! whose events name the watch they came from: the indexes fed this way (MACs, addresses, ipam
//! pools) track each watch's list on its own, so they must know which list an event belongs to.

use std::fmt::Debug;

use futures::stream::{BoxStream, select_all};
use futures::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::WatchScope;

impl WatchScope {
    /// How many watches [`watch_each`] runs.
    pub fn watches(&self) -> usize {
        match self {
            WatchScope::All => 1,
            WatchScope::Namespaces(names) => names.len(),
        }
    }

    /// The namespace watch `source` covers; `None` for the watch of all namespaces.
    pub fn namespace(&self, source: usize) -> Option<&str> {
        match self {
            WatchScope::All => None,
            WatchScope::Namespaces(names) => names.get(source).map(String::as_str),
        }
    }
}

/// The events of every watch of `scope`, each with its watch's number, retried with backoff.
pub fn watch_each<K>(
    client: Client,
    scope: &WatchScope,
) -> impl Stream<Item = (usize, Result<Event<K>, watcher::Error>)> + Send + use<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + 'static,
{
    let apis: Vec<Api<K>> = match scope {
        WatchScope::All => vec![Api::all(client)],
        WatchScope::Namespaces(names) => names
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect(),
    };
    select_all(apis.into_iter().enumerate().map(|(source, api)| {
        let events: BoxStream<'static, _> = watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |e| (source, e))
            .boxed();
        events
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_per_listed_namespace_or_one_for_all() {
        assert_eq!(WatchScope::All.watches(), 1);
        assert_eq!(WatchScope::All.namespace(0), None);
        let listed = WatchScope::Namespaces(vec!["a".into(), "b".into()]);
        assert_eq!(listed.watches(), 2);
        assert_eq!(listed.namespace(1), Some("b"));
        assert_eq!(listed.namespace(2), None);
    }
}
