//! The watch on Machines that feeds a [`LiveMacs`]: only each Machine's key and addresses are
//! kept, never the object.

use futures::StreamExt;
use futures::stream::select_all;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, ResourceExt};

use crate::api::Machine;
use crate::config::WatchScope;

use super::LiveMacs;
use super::index::{MacIndex, MachineKey, Source, mac_number};

/// The Machine's key and the addresses its spec sets.
pub fn addresses(m: &Machine) -> (MachineKey, Vec<u64>) {
    let key = format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any());
    let macs = m
        .spec
        .networks
        .iter()
        .filter_map(|n| n.mac_address.as_deref().and_then(mac_number))
        .collect();
    (key, macs)
}

/// Applies one event of watch `source`.
pub fn apply(index: &mut MacIndex, source: Source, event: Event<Machine>) {
    match event {
        Event::Init => index.begin_list(source),
        Event::InitApply(m) => {
            let (key, macs) = addresses(&m);
            index.listed(source, key, macs);
        }
        Event::InitDone => index.end_list(source),
        Event::Apply(m) => {
            let (key, macs) = addresses(&m);
            index.set(source, key, macs);
        }
        Event::Delete(m) => index.remove(&addresses(&m).0),
    }
}

/// How many watches [`follow`] runs for `scope` (what [`LiveMacs::watched`] waits for).
pub fn watches(scope: &WatchScope) -> usize {
    match scope {
        WatchScope::All => 1,
        WatchScope::Namespaces(names) => names.len(),
    }
}

/// Follows the Machines of `scope` into `live` until the task is dropped: one watch for all
/// namespaces, or one per namespace listed (the operator's RBAC may be namespaced then).
pub async fn follow(client: Client, scope: WatchScope, live: LiveMacs) {
    let apis: Vec<Api<Machine>> = match scope {
        WatchScope::All => vec![Api::all(client)],
        WatchScope::Namespaces(names) => names
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect(),
    };
    let mut events = select_all(apis.into_iter().enumerate().map(|(source, api)| {
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |e| (source, e))
            .boxed()
    }));
    while let Some((source, event)) = events.next().await {
        match event {
            Ok(event) => live.with_index(|index| apply(index, source, event)),
            Err(e) => {
                tracing::warn!(error = %e, "watching Machines for their MAC addresses failed; retrying")
            }
        }
    }
}
