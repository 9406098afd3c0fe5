//! The Node cache: only each Node's name and its `Ready` condition are kept (see
//! [`slim`]), and read back as a [`NodeReady`].

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::reconciler::decide::node::NodeReady;

/// The `Ready` condition of Node `name`, when it is cached.
pub fn ready(nodes: &Store<Node>, name: &str) -> Option<NodeReady> {
    nodes.get(&ObjectRef::new(name)).and_then(|n| ready_of(&n))
}

/// A Node's `Ready` condition; `None` without one.
pub fn ready_of(node: &Node) -> Option<NodeReady> {
    let c = (node.status.as_ref()?.conditions.as_ref()?)
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some(NodeReady {
        node: node.name_any(),
        status: c.status.clone(),
        since: c.last_transition_time.as_ref().map(|t| t.0),
    })
}

/// What the cache keeps of a Node: its name and resource version, and of its status only the
/// `Ready` condition's status and transition time (a Node's images, addresses, capacity and
/// labels would be most of its size).
pub fn slim(node: &mut Node) {
    let conditions = (node.status.take())
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ == "Ready")
        .map(|c| NodeCondition {
            type_: c.type_,
            status: c.status,
            last_transition_time: c.last_transition_time,
            ..Default::default()
        })
        .collect();
    node.metadata = ObjectMeta {
        name: node.metadata.name.take(),
        resource_version: node.metadata.resource_version.take(),
        ..Default::default()
    };
    node.spec = None;
    node.status = Some(NodeStatus {
        conditions: Some(conditions),
        ..Default::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_ready_condition_is_kept_and_read_back() {
        let mut node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "resourceVersion": "7", "uid": "u",
                "labels": {"kubernetes.io/hostname": "n1"}, "annotations": {"a": "b"}},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                     "message": "Kubelet stopped posting node status.",
                     "lastHeartbeatTime": "2026-11-28T07:00:00Z",
                     "lastTransitionTime": "2026-11-28T07:01:00Z"}
                ],
                "images": [{"names": ["quay.io/kubevirt/virt-launcher:v1"], "sizeBytes": 1}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]
            }
        }))
        .expect("node");
        slim(&mut node);
        assert_eq!(
            serde_json::to_value(&node).expect("json"),
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n1", "resourceVersion": "7"},
                "status": {"conditions": [{"type": "Ready", "status": "Unknown",
                    "lastTransitionTime": "2026-11-28T07:01:00Z"}]}})
        );
        let r = ready_of(&node).expect("ready");
        assert_eq!((r.node.as_str(), r.status.as_str()), ("n1", "Unknown"));
        assert_eq!(r.since, Some("2026-11-28T07:01:00Z".parse().expect("time")));
        node.status = None;
        assert_eq!(ready_of(&node), None);
    }
}
