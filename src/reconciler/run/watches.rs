//! The watches that fill the reconciler's caches, all built by [`watch`] from one [`Scope`].
//!
//! Each watch lists and decodes objects one by one: an object whose optional fields have a shape
//! our types do not expect (KubeVirt allows `memory.guest` as a number) is logged and left out
//! of its cache instead of failing the whole list. Every cached object is stripped of what the
//! reconcile never reads (`managedFields`, kubectl's last-applied annotation).

use std::fmt::Debug;
use std::hash::Hash;

use futures::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::Machine;
use crate::config::WatchScope;

use crate::reconciler::store::packed::{Brief, MachineBrief, Packed};
use crate::reconciler::store::presence::Presence;
use crate::reconciler::{MANAGED_BY, MANAGED_BY_LABEL};

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What one controller watches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    #[default]
    All,
    /// One namespace (Machines, VMs, claims and attachments there; StorageClasses are
    /// cluster-wide and always watched whole).
    Namespace(String),
}

/// One scope per controller: all namespaces, or each one listed.
pub fn scopes(given: &WatchScope) -> Vec<Scope> {
    match given {
        WatchScope::All => vec![Scope::All],
        WatchScope::Namespaces(list) => list.iter().cloned().map(Scope::Namespace).collect(),
    }
}

fn api<K>(client: &Client, scope: &Scope, namespaced: bool) -> Api<DynamicObject>
where
    K: Resource<DynamicType = ()>,
{
    let ar = ApiResource::erase::<K>(&());
    match scope {
        Scope::Namespace(ns) if namespaced => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// Only objects labelled as the operator's.
pub fn managed() -> watcher::Config {
    watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"))
}

/// Drops what the reconcile never reads, to keep the caches small.
fn slim<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(LAST_APPLIED);
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Decodes `obj` as `K`; an object that does not decode is logged (with the field at fault)
/// and skipped.
fn decode<K: DeserializeOwned>(obj: DynamicObject) -> Option<K> {
    let name = obj.name_any();
    let ns = obj.namespace().unwrap_or_default();
    let value = serde_json::to_value(obj).ok()?;
    match serde_path_to_error::deserialize::<_, K>(value) {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!(
                object = %name,
                object_namespace = %ns,
                field = %e.path(),
                error = %e.inner(),
                "object left out of the cache: a field has an unexpected shape"
            );
            None
        }
    }
}

/// `e` with its object mapped by `f`; `None` when `f` leaves the object out.
fn map_event<A, B>(e: watcher::Event<A>, f: fn(A) -> Option<B>) -> Option<watcher::Event<B>> {
    Some(match e {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)?),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)?),
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)?),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    })
}

/// [`map_event`] over a watch stream; errors pass through.
fn map_events<A, B>(
    events: impl Stream<Item = Result<watcher::Event<A>, watcher::Error>> + Send + 'static,
    f: fn(A) -> Option<B>,
) -> impl Stream<Item = Result<watcher::Event<B>, watcher::Error>> + Send + 'static
where
    A: Send + 'static,
    B: Send + 'static,
{
    events.filter_map(move |r| {
        let mapped = match r {
            Ok(e) => map_event(e, f).map(Ok),
            Err(e) => Some(Err(e)),
        };
        futures::future::ready(mapped)
    })
}

/// The watch events of `K` in `scope`, decoded one object at a time, slimmed, with backoff.
pub fn events<K>(
    client: &Client,
    scope: &Scope,
    config: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::Scope: 'static,
{
    let namespaced = std::any::TypeId::of::<K::Scope>()
        != std::any::TypeId::of::<k8s_openapi::ClusterResourceScope>();
    let events = watcher(api::<K>(client, scope, namespaced), config).default_backoff();
    map_events(events, decode::<K>).modify(slim::<K>)
}

/// What a watch tells of each object it sees change.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// `namespace/name`.
    pub key: &'a str,
    pub resource_version: Option<&'a str>,
    /// The object was deleted: its uid (per-object memory is dropped with it).
    pub deleted: Option<&'a str>,
}

/// Whether the objects of a (re)list are yielded as changes (triggers), or only stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lists {
    Trigger,
    /// Only later changes are yielded: the objects' Machines are reconciled by the Machines'
    /// own list (paced, see `first_pass`) and the resync.
    Quiet,
}

/// A watch that fills `writer` and yields every object it sees change (including deletions),
/// telling `seen` of each.
pub fn watch<K>(
    client: &Client,
    scope: &Scope,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    seen: impl Fn(Seen) + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
    K::Scope: 'static,
{
    reflect(
        events::<K>(client, scope, config),
        writer,
        seen,
        Lists::Trigger,
    )
}

/// Fills `writer` from `events` and yields every object changed, telling `seen` of each.
fn reflect<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    seen: impl Fn(Seen) + Send + 'static,
    lists: Lists,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    events
        .reflect(writer)
        .inspect(move |e| {
            let (o, deleted) = match e {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => (o, false),
                Ok(watcher::Event::Delete(o)) => (o, true),
                _ => return,
            };
            let meta = o.meta();
            seen(Seen {
                key: &key_of(o),
                resource_version: meta.resource_version.as_deref(),
                deleted: deleted.then(|| meta.uid.as_deref().unwrap_or_default()),
            });
        })
        .filter(move |e| {
            let listed = matches!(e, Ok(watcher::Event::InitApply(_)));
            futures::future::ready(lists == Lists::Trigger || !listed)
        })
        .touched_objects()
}

/// What a packed watch cache can hold.
pub trait Packable:
    Resource<DynamicType = ()>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Brief
    + Send
    + Sync
    + 'static
{
}

impl<K> Packable for K where
    K: Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Brief
        + Send
        + Sync
        + 'static
{
}

/// [`events`], each object packed (see [`Packed`]).
pub fn packed_events<K>(
    client: &Client,
    scope: &Scope,
    config: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<Packed<K>>, watcher::Error>> + Send + 'static
where
    K: Packable,
    K::Scope: 'static,
{
    map_events(events::<K>(client, scope, config), pack::<K>)
}

fn pack<K: Resource + Serialize + Brief>(o: K) -> Option<Packed<K>> {
    match Packed::pack(&o) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(object = %key_of(&o), error = %e, "object left out of the cache: it does not encode");
            None
        }
    }
}

/// [`watch`] into a cache of packed objects.
pub fn watch_packed<K>(
    client: &Client,
    scope: &Scope,
    config: watcher::Config,
    (writer, lists): (reflector::store::Writer<Packed<K>>, Lists),
    seen: impl Fn(Seen) + Send + 'static,
) -> impl Stream<Item = Result<Packed<K>, watcher::Error>> + Send + 'static
where
    K: Packable,
    K::Scope: 'static,
{
    reflect(
        packed_events::<K>(client, scope, config),
        writer,
        seen,
        lists,
    )
}

/// Fills `presence` with the names of every `K` in `scope`, whoever made it (metadata-only
/// watch).
pub fn names<K>(
    client: &Client,
    scope: &Scope,
    presence: Presence,
) -> impl Future<Output = ()> + Send + use<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<PartialObjectMeta<K>> = match scope {
        Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
        Scope::All => Api::all(client.clone()),
    };
    watcher(api, watcher::Config::default())
        .default_backoff()
        .for_each(move |e| {
            if let Ok(e) = e {
                presence.apply(e);
            }
            async {}
        })
}

pub fn key_of<K: Resource>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

pub fn ignore(_: Seen) {}

/// Machines in `ns` whose brief `uses` holds for (to trigger them on a dependency's change).
pub fn machines_using(
    machines: &Store<Packed<Machine>>,
    ns: Option<String>,
    uses: impl Fn(&MachineBrief) -> bool,
) -> Vec<ObjectRef<Packed<Machine>>> {
    machines
        .state_filter(|m| (ns.is_none() || m.namespace() == ns) && uses(m.brief()))
        .iter()
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconciler::apis::kubevirt::VirtualMachine;
    use serde_json::json;

    #[test]
    fn an_object_of_unexpected_shape_is_skipped_not_fatal() {
        let odd: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "odd", "namespace": "ns"},
            "spec": {"template": {"spec": {"domain": {"memory": {"guest": 1073741824_u64}, "devices": {}}}}}
        }))
        .unwrap();
        assert!(map_event(watcher::Event::InitApply(odd), decode::<VirtualMachine>).is_none());
        let fine: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "fine", "namespace": "ns"},
            "spec": {"template": {"spec": {"domain": {"memory": {"guest": "1Gi"}, "devices": {}}}}}
        }))
        .unwrap();
        assert!(matches!(
            map_event(watcher::Event::InitApply(fine), decode::<VirtualMachine>),
            Some(watcher::Event::InitApply(vm)) if vm.name_any() == "fine"
        ));
        assert!(matches!(
            map_event(watcher::Event::InitDone, decode::<VirtualMachine>),
            Some(watcher::Event::InitDone)
        ));
    }
}
