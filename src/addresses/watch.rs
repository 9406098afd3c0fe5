//! The watches that feed a [`LiveAddresses`]: the Machines (through the MAC watch, one watch
//! for both indexes) and the NetworkConfigurations' pools. Only keys, packed addresses and
//! pools are kept, never the objects.

use futures::StreamExt;
use kube::runtime::watcher::Event;
use kube::{Client, ResourceExt};

use crate::api::{Machine, NetworkConfiguration};
use crate::config::{WatchScope, watch_each};
use crate::machine::FieldPath;

use super::LiveAddresses;
use super::held::{Held, held_by};
use super::index::{AddressIndex, Source};
use super::pool::Pool;

/// The Machine's key and the addresses it holds.
pub fn addresses(m: &Machine) -> (String, Vec<Held>) {
    let ns = m.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", m.name_any());
    let reported = |name: &str| -> &[String] {
        let found = m
            .status
            .as_ref()
            .and_then(|s| (s.interfaces.iter()).find(|i| i.name.as_deref() == Some(name)));
        found.map(|i| i.ip_addresses.as_slice()).unwrap_or(&[])
    };
    let networks = (m.spec.networks.iter()).map(|n| {
        (
            n.name.as_str(),
            n.network_name.as_str(),
            n.addresses.as_slice(),
        )
    });
    (key, held_by(&ns, networks, reported))
}

/// Applies one event of Machine watch `source`.
pub fn apply(index: &mut AddressIndex, source: Source, event: &Event<Machine>) {
    match event {
        Event::Init => index.begin_list(source),
        Event::InitApply(m) => {
            let (key, held) = addresses(m);
            index.listed(source, &key, held);
        }
        Event::InitDone => index.end_list(source),
        Event::Apply(m) => {
            let (key, held) = addresses(m);
            index.set(source, &key, held);
        }
        Event::Delete(m) => index.remove(&addresses(m).0),
    }
}

/// A NetworkConfiguration's key and its pool; an `ipam` the webhook would refuse gives none
/// (one stored past the webhook hands out nothing).
pub fn pool(nc: &NetworkConfiguration) -> (String, Option<Pool>) {
    let key = format!("{}/{}", nc.namespace().unwrap_or_default(), nc.name_any());
    let root = FieldPath::new("spec");
    let path = root.child("ipam");
    let pool = (nc.spec.ipam.as_ref()).and_then(|i| Pool::check(i, &path).ok());
    (key, pool)
}

/// Follows the NetworkConfigurations of `scope` into `live` until the task is dropped.
pub async fn follow_pools(client: Client, scope: WatchScope, live: LiveAddresses) {
    let mut events = watch_each::<NetworkConfiguration>(client, &scope);
    while let Some((source, event)) = events.next().await {
        let prefix = scope.namespace(source).map(|ns| format!("{ns}/"));
        match event {
            Ok(event) => live.with_shared(|s| match event {
                Event::Init => s.begin_pools(source),
                Event::InitApply(nc) => {
                    let (key, p) = pool(&nc);
                    s.listed_pool(source, key, p);
                }
                Event::InitDone => s.end_pools(source, |k| {
                    prefix.as_deref().is_none_or(|p| k.starts_with(p))
                }),
                Event::Apply(nc) => {
                    let (key, p) = pool(&nc);
                    s.set_pool(key, p);
                }
                Event::Delete(nc) => s.set_pool(pool(&nc).0, None),
            }),
            Err(e) => {
                tracing::warn!(error = %e, "watching NetworkConfigurations for their ipam failed; retrying")
            }
        }
    }
}
