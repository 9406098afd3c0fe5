//! The watch on Machines that feeds a [`LiveMacs`]: only each Machine's key and addresses are
//! kept, never the object.

use futures::StreamExt;
use kube::runtime::watcher::Event;
use kube::{Client, ResourceExt};

use crate::addresses::LiveAddresses;
use crate::addresses::watch as address_watch;
use crate::api::Machine;
use crate::config::{WatchScope, watch_each};

use super::LiveMacs;
use super::held::{Held, held_by};
use super::index::{MacIndex, MachineKey, Source};

/// The Machine's key and the addresses it holds: each spec network's, else the one its VM
/// reports for that interface (a Machine from before the MAC rule).
pub fn addresses(m: &Machine) -> (MachineKey, Vec<Held>) {
    let key = format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any());
    let reported = |name: &str| {
        m.status
            .as_ref()?
            .interfaces
            .iter()
            .find(|i| i.name.as_deref() == Some(name))?
            .mac_address
            .as_deref()
    };
    let networks = m
        .spec
        .networks
        .iter()
        .map(|n| (n.name.as_str(), n.mac_address.as_deref()));
    (key, held_by(networks, reported))
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

/// Follows the Machines of `scope` into `live` (and `addresses`: one watch feeds both indexes)
/// until the task is dropped: one watch for all namespaces, or one per namespace listed (the
/// operator's RBAC may be namespaced then).
pub async fn follow(client: Client, scope: WatchScope, live: LiveMacs, addresses: LiveAddresses) {
    let mut events = watch_each::<Machine>(client, &scope);
    while let Some((source, event)) = events.next().await {
        match event {
            Ok(event) => {
                addresses.with_shared(|s| address_watch::apply(&mut s.index, source, &event));
                live.with_index(|index| apply(index, source, event))
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching Machines for their MAC addresses failed; retrying")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::macs::held::Held;
    use crate::macs::index::mac_number;

    #[test]
    fn a_machine_holds_its_spec_addresses_and_what_its_vm_reports_where_the_spec_has_none() {
        let m: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": "old", "namespace": "team-a"},
            "spec": {"networks": [
                {"name": "eth0", "networkName": "a", "macAddress": "02:00:00:00:00:01"},
                {"name": "eth1", "networkName": "b"},
                {"name": "eth2", "networkName": "c"}
            ]},
            "status": {"interfaces": [
                {"name": "eth0", "macAddress": "52:54:00:00:00:01"},
                {"name": "eth1", "macAddress": "52:54:00:00:00:02"}
            ]}
        }))
        .expect("machine");
        let n = |s| mac_number(s).expect("mac");
        assert_eq!(
            addresses(&m),
            (
                "team-a/old".to_owned(),
                vec![
                    Held::spec(n("02:00:00:00:00:01")),
                    Held::reported(n("52:54:00:00:00:02"))
                ]
            )
        );
        let mut index = MacIndex::new(1);
        apply(&mut index, 0, Event::Apply(m.clone()));
        assert_eq!(index.owner(n("52:54:00:00:00:02")), Some("team-a/old"));
        assert_eq!(
            index.owner(n("52:54:00:00:00:01")),
            None,
            "the spec decides"
        );
        apply(&mut index, 0, Event::Delete(m));
        assert_eq!(index.owner(n("52:54:00:00:00:02")), None);
    }
}
