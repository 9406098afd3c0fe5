//! A VM on a node that stopped being Ready (pure, table-tested below). When a node dies, its
//! kubelet stops reporting and the node lifecycle controller turns the Node's `Ready` condition
//! to `Unknown` (or the kubelet itself reports `False`); KubeVirt keeps the VMI `Running`, as it
//! cannot tell a dead node from a cut link. Past a grace period (`--node-unreachable-grace`) the
//! Machine says so, as `Ready=False` with reason `NodeUnreachable`, naming the node, since when,
//! and the recovery: the `node.kubernetes.io/out-of-service` taint, with which KubeVirt (and the
//! pod garbage collector) let the VM start elsewhere. The operator deletes nothing on its own:
//! only the admin can know that the node is really down.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// The reason word of `Ready=False`, of the Warning Event, everywhere.
pub const NODE_UNREACHABLE: &str = "NodeUnreachable";
/// The taint that tells Kubernetes (and KubeVirt) a node is down for good.
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// A Node's `Ready` condition, as the Node cache keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReady {
    /// The Node's name.
    pub node: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Its `lastTransitionTime`.
    pub since: Option<Timestamp>,
}

/// The VM's node, unreachable past the grace: what `Ready=False` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreachable {
    pub node: String,
    pub message: String,
}

/// What the node of a Machine's VMI comes to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    /// Ready, or nothing known (no VMI, no node, no Node cached, no `Ready` condition).
    #[default]
    Fine,
    /// Not Ready, but within the grace: nothing changes; look again after this long.
    Grace(Duration),
    /// Not Ready past the grace.
    Unreachable(Unreachable),
}

impl Verdict {
    pub fn unreachable(&self) -> Option<&Unreachable> {
        match self {
            Verdict::Unreachable(u) => Some(u),
            _ => None,
        }
    }

    /// When to run again for the grace to end.
    pub fn recheck_in(&self) -> Option<Duration> {
        match self {
            Verdict::Grace(d) => Some(*d),
            _ => None,
        }
    }
}

/// The verdict on the node `vmi_node` the Machine's own VMI runs on, given that Node's `Ready`
/// condition `ready` (`None`: not cached), the `grace` and `now`. A condition without a
/// transition time cannot be timed and is never held against the VM.
pub fn decide(
    vmi_node: Option<&str>,
    ready: Option<&NodeReady>,
    grace: Duration,
    now: Timestamp,
) -> Verdict {
    let Some(node) = vmi_node.filter(|n| !n.is_empty()) else {
        return Verdict::Fine;
    };
    let Some(ready) = ready.filter(|r| r.node == node && r.status != "True") else {
        return Verdict::Fine;
    };
    let Some(since) = ready.since else {
        return Verdict::Fine;
    };
    let down_for = now.duration_since(since).unsigned_abs();
    if since <= now && down_for >= grace {
        let how = if ready.status == "Unknown" {
            "unreachable (its kubelet stopped reporting; Ready=Unknown)"
        } else {
            "NotReady (Ready=False)"
        };
        let message = format!(
            "the VM's node {node} has been {how} since {since}: the VM cannot be reached. If the node is down for good, taint it with {OUT_OF_SERVICE_TAINT} (kubectl taint nodes {node} {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute) and KubeVirt starts the VM elsewhere; the operator deletes nothing on its own"
        );
        return Verdict::Unreachable(Unreachable {
            node: node.to_owned(),
            message,
        });
    }
    // A transition time ahead of our clock counts as now: the whole grace is still to come.
    let left = if since > now {
        grace
    } else {
        grace.saturating_sub(down_for)
    };
    Verdict::Grace(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn ready(node: &str, status: &str, since: Option<&str>) -> NodeReady {
        NodeReady {
            node: node.into(),
            status: status.into(),
            since: since.map(at),
        }
    }

    #[test]
    fn a_node_not_ready_past_the_grace_is_said_and_nothing_before() {
        let now = at("2026-11-28T08:00:00Z");
        let grace = Duration::from_secs(60);
        let secs = Duration::from_secs;
        // (row, VMI's node, Node's Ready, expected: None fine, Some(Ok(left)) grace, Some(Err(())) unreachable)
        type Want = Option<Result<Duration, ()>>;
        let rows: [(&str, Option<&str>, Option<NodeReady>, Want); 11] = [
            (
                "no VMI node",
                None,
                Some(ready("n1", "False", Some("2026-11-28T07:00:00Z"))),
                None,
            ),
            (
                "empty VMI node",
                Some(""),
                Some(ready("", "False", Some("2026-11-28T07:00:00Z"))),
                None,
            ),
            ("Node not cached", Some("n1"), None, None),
            (
                "Ready",
                Some("n1"),
                Some(ready("n1", "True", Some("2026-11-28T07:00:00Z"))),
                None,
            ),
            (
                "another node's condition",
                Some("n1"),
                Some(ready("n2", "False", Some("2026-11-28T07:00:00Z"))),
                None,
            ),
            (
                "no transition time",
                Some("n1"),
                Some(ready("n1", "Unknown", None)),
                None,
            ),
            (
                "Unknown within the grace",
                Some("n1"),
                Some(ready("n1", "Unknown", Some("2026-11-28T07:59:45Z"))),
                Some(Ok(secs(45))),
            ),
            (
                "False just now",
                Some("n1"),
                Some(ready("n1", "False", Some("2026-11-28T08:00:00Z"))),
                Some(Ok(secs(60))),
            ),
            (
                "clock skew: in the future",
                Some("n1"),
                Some(ready("n1", "False", Some("2026-11-28T08:05:00Z"))),
                Some(Ok(secs(60))),
            ),
            (
                "Unknown exactly at the grace",
                Some("n1"),
                Some(ready("n1", "Unknown", Some("2026-11-28T07:59:00Z"))),
                Some(Err(())),
            ),
            (
                "False long ago",
                Some("n1"),
                Some(ready("n1", "False", Some("2026-11-28T07:00:00Z"))),
                Some(Err(())),
            ),
        ];
        for (row, node, r, want) in rows {
            let got = decide(node, r.as_ref(), grace, now);
            let got = match &got {
                Verdict::Fine => None,
                Verdict::Grace(d) => Some(Ok(*d)),
                Verdict::Unreachable(_) => Some(Err(())),
            };
            assert_eq!(got, want, "{row}");
        }
    }

    #[test]
    fn the_message_names_the_node_since_when_and_the_recovery() {
        let now = at("2026-11-28T08:00:00Z");
        let r = ready("n1", "Unknown", Some("2026-11-28T07:58:00Z"));
        let v = decide(Some("n1"), Some(&r), Duration::from_secs(60), now);
        let u = v.unreachable().expect("unreachable");
        assert_eq!(u.node, "n1");
        for part in [
            "node n1",
            "since 2026-11-28T07:58:00Z",
            "Ready=Unknown",
            "node.kubernetes.io/out-of-service",
            "kubectl taint nodes n1",
            "deletes nothing",
        ] {
            assert!(u.message.contains(part), "{part}: {}", u.message);
        }
        assert_eq!(v.recheck_in(), None);
        let r = ready("n1", "False", Some("2026-11-28T07:58:00Z"));
        let v = decide(Some("n1"), Some(&r), Duration::from_secs(60), now);
        assert!(
            v.unreachable()
                .expect("unreachable")
                .message
                .contains("NotReady (Ready=False)")
        );
        // A zero grace says it at once.
        let r = ready("n1", "False", Some("2026-11-28T08:00:00Z"));
        assert!(
            decide(Some("n1"), Some(&r), Duration::ZERO, now)
                .unreachable()
                .is_some()
        );
    }
}
