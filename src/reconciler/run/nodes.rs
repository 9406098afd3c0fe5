//! The Node watch of one workload cluster: it fills the Node cache (each Node's name and `Ready`
//! condition only) and wakes the Machines whose VMIs run on a Node whose `Ready` changed.
//!
//! Cost stays bounded: a Node's heartbeats do not change what is kept, so only a change of its
//! `Ready` status or transition time wakes anything, and the Machines on it are found from the
//! VMI cache's briefs (their node, decoded), never by a request. Nodes are optional: where they
//! cannot be listed (RBAC without `list`/`watch` on nodes), a warning says so once, the watch
//! ends, and no Machine is ever said to be on an unreachable node; readiness never waits for it.

use std::collections::HashMap;

use futures::stream::{self, BoxStream};
use futures::{StreamExt, future};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};

use super::watches::{self, Scope};
use crate::api::Machine;
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;
use crate::reconciler::decide::node::NodeReady;
use crate::reconciler::observe::nodes::{ready_of, slim};
use crate::reconciler::store::packed::Packed;

/// A Machine to reconcile.
pub type Trigger = ObjectRef<Packed<Machine>>;

/// Watches the Nodes of `client`'s cluster into `writer`; yields the Machines (by their VMIs in
/// `vmis`) on each Node whose `Ready` changed. `cluster` names it in the warning.
pub fn watch(
    client: &Client,
    writer: Writer<Node>,
    vmis: Store<Packed<VirtualMachineInstance>>,
    cluster: Option<String>,
) -> BoxStream<'static, Trigger> {
    let mut seen: HashMap<String, NodeReady> = HashMap::new();
    watches::events::<Node>(client, &Scope::All, watcher::Config::default())
        .take_while(move |e| future::ready(!forbidden(e, cluster.as_deref())))
        .modify(slim)
        .reflect(writer)
        .filter_map(move |e| {
            let woken = match e {
                Ok(watcher::Event::Apply(n)) => changed(&mut seen, &n, false),
                Ok(watcher::Event::InitApply(n)) => changed(&mut seen, &n, true),
                Ok(watcher::Event::Delete(n)) => {
                    let was = seen.remove(&n.metadata.name.clone().unwrap_or_default());
                    was.filter(|r| r.status != "True").map(|r| r.node)
                }
                _ => None,
            };
            future::ready(woken)
        })
        .flat_map(move |node| stream::iter(machines_on(&vmis, &node)))
        .boxed()
}

/// A first list or watch refused for want of rights: Nodes are left alone from then on.
fn forbidden(e: &Result<watcher::Event<Node>, watcher::Error>, cluster: Option<&str>) -> bool {
    let refused = match e {
        Err(
            watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s)),
        ) => s.code == 403,
        Err(watcher::Error::WatchError(s)) => s.code == 403,
        _ => false,
    };
    if refused {
        tracing::warn!(
            cluster = cluster.unwrap_or("local"),
            "cannot list Nodes (RBAC: grant list and watch on nodes): a VM on a dead node is not reported (NodeUnreachable); restart the operator after granting it"
        );
    }
    refused
}

/// The Node whose `Ready` changed, if it did. A Node first seen in a (re)list wakes its
/// Machines only when it is not Ready: the Machines' own first runs read the rest.
fn changed(seen: &mut HashMap<String, NodeReady>, node: &Node, listed: bool) -> Option<String> {
    let now = ready_of(node)?;
    let before = seen.insert(now.node.clone(), now.clone());
    let wake = match before {
        Some(b) => b != now,
        None => !listed || now.status != "True",
    };
    wake.then_some(now.node)
}

/// The Machines whose VMIs run on `node`, from the VMI cache's briefs.
fn machines_on(vmis: &Store<Packed<VirtualMachineInstance>>, node: &str) -> Vec<Trigger> {
    vmis.state()
        .iter()
        .filter(|v| v.brief().node.as_deref() == Some(node))
        .filter_map(|v| {
            let machine = v.brief().machine.clone()?;
            Some(ObjectRef::new(&machine).within(&kube::ResourceExt::namespace(v.as_ref())?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(status: &str, since: &str) -> Node {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"conditions": [{"type": "Ready", "status": status,
                "lastTransitionTime": since}]}
        }))
        .expect("node")
    }

    #[test]
    fn only_a_change_of_ready_wakes_and_a_list_only_for_a_node_not_ready() {
        let mut seen = HashMap::new();
        let t1 = "2026-11-28T07:00:00Z";
        let t2 = "2026-11-28T07:05:00Z";
        // (row, node, from a list, wakes)
        let rows = [
            ("listed Ready", node("True", t1), true, false),
            ("heartbeat: the same Ready", node("True", t1), false, false),
            ("turns Unknown", node("Unknown", t2), false, true),
            ("relisted, unchanged", node("Unknown", t2), true, false),
            ("Ready again", node("True", t2), false, true),
        ];
        for (row, n, listed, wakes) in rows {
            assert_eq!(changed(&mut seen, &n, listed).is_some(), wakes, "{row}");
        }
        let mut fresh = HashMap::new();
        assert!(
            changed(&mut fresh, &node("False", t1), true).is_some(),
            "listed NotReady"
        );
        let mut fresh = HashMap::new();
        assert!(
            changed(&mut fresh, &node("True", t1), false).is_some(),
            "a new Node"
        );
    }

    #[test]
    fn the_machines_on_a_node_come_from_the_vmi_cache() {
        let (store, mut w) = kube::runtime::reflector::store::<Packed<VirtualMachineInstance>>();
        for (name, machine, node) in [
            ("a", Some("a"), "n1"),
            ("b", Some("b"), "n2"),
            ("c", None, "n1"),
        ] {
            let mut labels = json!({});
            if let Some(m) = machine {
                labels = json!({crate::reconciler::MACHINE_LABEL: m});
            }
            let vmi: VirtualMachineInstance = serde_json::from_value(json!({
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {"name": name, "namespace": "ns", "labels": labels},
                "spec": {}, "status": {"nodeName": node}
            }))
            .expect("vmi");
            w.apply_watcher_event(&watcher::Event::Apply(Packed::pack(&vmi).expect("pack")));
        }
        let on = machines_on(&store, "n1");
        assert_eq!(on, vec![ObjectRef::new("a").within("ns")]);
        assert!(machines_on(&store, "n3").is_empty());
    }
}
