//! A remote cluster's identity (pure): the uid of its `kube-system` namespace, which lives as
//! long as the cluster and no kubeconfig can fake. The KubevirtConfig's status records it at
//! first Ready, and each Machine's status the one it was made on. A probe that finds another
//! (a kubeconfig of the wrong cluster pasted during rotation, a KubevirtConfig re-created for a
//! replacement cluster) stops all work on the config and its Machines (`ClusterChanged`) until
//! an admin acknowledges the move with [`ACKNOWLEDGE_ANNOTATION`] naming the new identity.

use super::Verdict;
use crate::api::names::ACKNOWLEDGE_CLUSTER_ANNOTATION as ACKNOWLEDGE_ANNOTATION;
use crate::clusters::Reason;

/// The namespace whose uid is a cluster's identity.
pub const IDENTITY_NAMESPACE: &str = "kube-system";

/// What a cluster found says about the one recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Nothing recorded yet: record it.
    First,
    /// The one recorded.
    Same,
    /// Another, acknowledged by the admin (the annotation names it): record it.
    Acknowledged,
    /// Another, not acknowledged: nothing is done on either cluster.
    Changed,
}

impl Seen {
    /// Whether work may go on there (recording `found`).
    pub fn usable(&self) -> bool {
        *self != Seen::Changed
    }
}

/// `found` (the cluster reached now) against `recorded`, with the KubevirtConfig's
/// acknowledgement annotation `acknowledged`.
pub fn compare(recorded: Option<&str>, found: &str, acknowledged: Option<&str>) -> Seen {
    match recorded {
        None => Seen::First,
        Some(r) if r == found => Seen::Same,
        Some(_) if acknowledged == Some(found) => Seen::Acknowledged,
        Some(_) => Seen::Changed,
    }
}

/// How an admin who means the move lets work go on.
fn way_out(config: &str, found: &str) -> String {
    format!(
        "nothing is made, changed or deleted on either cluster until an admin who means the move annotates the KubevirtConfig: kubectl annotate kubevirtconfig {config} {ACKNOWLEDGE_ANNOTATION}={found}"
    )
}

/// The KubevirtConfig's health once its cluster answered as `found`: a Ready verdict stays
/// Ready (and records `found`) unless the identity changed without acknowledgement.
pub fn checked(
    verdict: Verdict,
    config: &str,
    found: &str,
    recorded: Option<&str>,
    acknowledged: Option<&str>,
) -> Verdict {
    if verdict.reason != Reason::Ready {
        return verdict;
    }
    match compare(recorded, found, acknowledged) {
        Seen::Changed => Verdict {
            reason: Reason::ClusterChanged,
            message: format!(
                "the kubeconfig reaches another cluster (kube-system uid {found}) than the one recorded at first Ready ({}): {}",
                recorded.unwrap_or_default(),
                way_out(config, found)
            ),
            apis: None,
            identity: None,
        },
        _ => Verdict {
            identity: Some(found.to_owned()),
            ..verdict
        },
    }
}

/// Why a Machine made on cluster `recorded` waits now that its KubevirtConfig reaches `found`
/// (the config was re-created, or its move acknowledged for other Machines); None: it may go on.
pub fn machine_waits(
    config: &str,
    recorded: Option<&str>,
    found: &str,
    acknowledged: Option<&str>,
) -> Option<String> {
    (compare(recorded, found, acknowledged) == Seen::Changed).then(|| {
        format!(
            "this Machine was made on cluster {} (its kube-system uid), but KubevirtConfig {config} now reaches cluster {found}: {}",
            recorded.unwrap_or_default(),
            way_out(config, found)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clusters::Apis;

    fn ready() -> Verdict {
        Verdict {
            reason: Reason::Ready,
            message: "Kubernetes v1.20.2".into(),
            apis: Some(Apis::default()),
            identity: None,
        }
    }

    #[test]
    fn an_identity_is_recorded_once_and_a_new_one_waits_for_the_admin() {
        // (recorded, found, acknowledged, seen)
        let cases = [
            (None, "uid-a", None, Seen::First),
            (None, "uid-a", Some("uid-b"), Seen::First),
            (Some("uid-a"), "uid-a", None, Seen::Same),
            (Some("uid-a"), "uid-a", Some("uid-old"), Seen::Same),
            (Some("uid-a"), "uid-b", None, Seen::Changed),
            // Acknowledging another cluster than the one found acknowledges nothing.
            (Some("uid-a"), "uid-b", Some("uid-c"), Seen::Changed),
            (Some("uid-a"), "uid-b", Some(""), Seen::Changed),
            (Some("uid-a"), "uid-b", Some("uid-b"), Seen::Acknowledged),
        ];
        for (recorded, found, ack, want) in cases {
            assert_eq!(
                compare(recorded, found, ack),
                want,
                "{recorded:?} {found} {ack:?}"
            );
            assert_eq!(want.usable(), want != Seen::Changed);
        }
    }

    #[test]
    fn a_changed_cluster_is_not_ready_and_says_how_to_acknowledge() {
        let v = checked(ready(), "dc1", "uid-b", Some("uid-a"), None);
        assert_eq!(v.reason, Reason::ClusterChanged);
        assert_eq!(v.apis, None, "nothing is offered to the Machines");
        assert_eq!(v.identity, None, "the recorded one stays");
        assert!(
            v.message.contains("uid-b") && v.message.contains("uid-a"),
            "{}",
            v.message
        );
        assert!(
            v.message.ends_with(
                "kubectl annotate kubevirtconfig dc1 vitistack.io/acknowledge-cluster=uid-b"
            ),
            "{}",
            v.message
        );
        for (recorded, ack) in [
            (None, None),
            (Some("uid-b"), None),
            (Some("uid-a"), Some("uid-b")),
        ] {
            let v = checked(ready(), "dc1", "uid-b", recorded, ack);
            assert_eq!(v.reason, Reason::Ready, "{recorded:?} {ack:?}");
            assert_eq!(v.identity.as_deref(), Some("uid-b"));
        }
        // An unready verdict is left as it is (no identity was found).
        let down = Verdict {
            reason: Reason::Unreachable,
            ..ready()
        };
        assert_eq!(
            checked(down.clone(), "dc1", "uid-b", Some("uid-a"), None),
            down
        );
    }

    #[test]
    fn a_machine_made_on_another_cluster_waits_until_acknowledged() {
        assert_eq!(
            machine_waits("dc1", None, "uid-b", None),
            None,
            "never made"
        );
        assert_eq!(machine_waits("dc1", Some("uid-b"), "uid-b", None), None);
        assert_eq!(
            machine_waits("dc1", Some("uid-a"), "uid-b", Some("uid-b")),
            None
        );
        let m = machine_waits("dc1", Some("uid-a"), "uid-b", None).expect("waits");
        assert!(
            m.starts_with("this Machine was made on cluster uid-a"),
            "{m}"
        );
        assert!(m.contains("vitistack.io/acknowledge-cluster=uid-b"), "{m}");
    }
}
