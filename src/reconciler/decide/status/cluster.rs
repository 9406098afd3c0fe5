//! `status.cluster` and `ClusterReady`, shown for a Machine on a remote cluster (pure).
//!
//! While its cluster cannot be worked on (its KubevirtConfig missing or not Ready, or its caches
//! still filling), nothing else of the status is recomputed: what was last seen there stays, and
//! `ClusterReady` and `Ready` say why it is not current ([`super::cluster_unready`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::{Cond, condition};

/// `ClusterReady` while the Machine's remote cluster is worked on.
pub(super) fn ready(cluster: Option<&str>) -> Option<Cond> {
    let name = cluster?;
    Some(Cond::new(
        condition::CLUSTER_READY,
        "True",
        READY,
        format!("KubevirtConfig {name}'s cluster is reachable and its caches are filled"),
    ))
}

/// The `ClusterReady` reason while the cluster is worked on (KubevirtConfig's own word).
pub const READY: &str = "Ready";

/// Whether `conditions` say the cluster was last seen working (or nothing says otherwise).
pub fn was_ready(conditions: &[Condition]) -> bool {
    !conditions
        .iter()
        .any(|c| c.type_ == condition::CLUSTER_READY && c.status == "False")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::super::cluster_unready;
    use super::*;
    use crate::api::MachineStatus;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap_or_default()
    }

    #[test]
    fn unready_keeps_what_was_seen_and_says_why() {
        let before = MachineStatus {
            phase: Some("Running".into()),
            node_name: Some("n1".into()),
            ..MachineStatus::default()
        };
        let s = cluster_unready(
            Some(&before),
            Some(3),
            ("dc1", "Unreachable", "no answer"),
            at(100),
        );
        assert_eq!(
            s.phase.as_deref(),
            Some("Running"),
            "nothing else recomputed"
        );
        assert_eq!(s.node_name.as_deref(), Some("n1"));
        assert_eq!(s.cluster.as_deref(), Some("dc1"));
        for t in [condition::CLUSTER_READY, condition::READY] {
            let c = s.conditions.iter().find(|c| c.type_ == t).expect(t);
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                ("False", "Unreachable")
            );
            assert!(c.message.contains("dc1") && c.message.contains("no answer"));
        }
        assert!(!was_ready(&s.conditions));
        // The same again later: nothing changes but time, so nothing is written.
        let again = cluster_unready(
            Some(&s),
            Some(3),
            ("dc1", "Unreachable", "no answer"),
            at(500),
        );
        assert_eq!(again, s);
    }

    #[test]
    fn ready_is_shown_only_for_a_remote_machine() {
        assert!(ready(None).is_none());
        assert!(ready(Some("dc1")).is_some());
        assert!(was_ready(&[]));
    }
}
