//! Where a snapshot or restore of a Machine runs (pure, table-tested below): on the cluster the
//! operator runs in, on the Machine's remote cluster through the very connection the Machine
//! reconciler uses ([`crate::clusters::Registry`]), or nowhere yet, with the reason the
//! reconciler would give (`ClusterReady=False`): the KubevirtConfig's own (`Unreachable`,
//! `ClusterChanged`, ...), `KubevirtConfigNotFound`, `KubeVirtNotInstalled`,
//! `PlacementForbidden`, or [`NOT_PROBED`].

use std::sync::Arc;

use crate::clusters::decide::identity::machine_waits;
use crate::clusters::{Connection, Health, Reason};
use crate::machine::placement::Placement;
use crate::reconciler::run::remotes::{Unready, usable};

/// The reason while a KubevirtConfig exists but was not probed yet (a leader's first seconds).
pub const NOT_PROBED: &str = "ClusterNotProbed";

/// Where the work runs.
#[derive(Clone, Debug)]
pub enum Site {
    Local,
    Remote(Arc<Connection>),
    /// Nothing is read or written on any workload cluster now: why.
    Wait(Unready),
}

impl Site {
    pub fn is_remote(&self) -> bool {
        matches!(self, Site::Remote(_))
    }
}

/// What the site is decided from.
#[derive(Clone, Debug, Default)]
pub struct Seen<'a> {
    /// The KubevirtConfig's health, and whether it exists (`None`: not listed yet).
    pub health: Option<Health>,
    pub exists: Option<bool>,
    /// Why its `namespaceSelector` refuses the Machine's namespace (`PlacementForbidden`).
    pub forbidden: Option<String>,
    /// The cluster identity the Machine's status says it was made on.
    pub made_on: Option<&'a str>,
    /// The identity the work itself is pinned to (a snapshot taken there): any other cluster,
    /// acknowledged or not, does not hold it.
    pub pinned: Option<&'a str>,
}

/// The site of work for a Machine placed at `placement`.
pub fn site(placement: &Placement, seen: Seen) -> Site {
    let Placement::Remote(name) = placement else {
        return Site::Local;
    };
    let wait = |reason: &str, message: String| {
        Site::Wait(Unready {
            reason: reason.to_owned(),
            message: format!("cluster {name}: {message}"),
        })
    };
    if let Some(why) = seen.forbidden {
        return wait(
            crate::reconciler::decide::placement::PLACEMENT_FORBIDDEN,
            why,
        );
    }
    let connection = match usable(seen.health, seen.exists) {
        Ok(c) => c,
        Err(Some(u)) => return wait(&u.reason, u.message),
        Err(None) => return wait(NOT_PROBED, "not probed yet".to_owned()),
    };
    let (found, ack) = (
        connection.identity.as_str(),
        connection.acknowledged.as_deref(),
    );
    if let Some(pinned) = seen.pinned.filter(|p| *p != found) {
        let message = format!(
            "this was made on cluster {pinned} (its kube-system uid), but KubevirtConfig {name} \
             now reaches cluster {found}: nothing of it is there"
        );
        return wait(Reason::ClusterChanged.as_str(), message);
    }
    if let Some(message) = machine_waits(name, seen.made_on, found, ack) {
        return wait(Reason::ClusterChanged.as_str(), message);
    }
    Site::Remote(connection)
}

/// Whether a reason is for good until an admin acts (the snapshot fails at once): the
/// Machine may not be on that cluster at all.
pub fn refused(reason: &str) -> bool {
    reason == crate::reconciler::decide::placement::PLACEMENT_FORBIDDEN
}

/// Why a snapshot taken on cluster `taken_on` (KubevirtConfig and identity; `None`: the
/// operator's own) cannot be restored into a Machine whose disks are on `machine_on`: a restore
/// reads the snapshot where the Machine is, and one taken elsewhere is not there.
pub fn elsewhere(
    taken_on: Option<(&str, &str)>,
    machine_on: Option<(&str, &str)>,
) -> Option<String> {
    let name = |c: Option<(&str, &str)>| match c {
        None => "the operator's own cluster".to_owned(),
        Some((config, identity)) => format!("cluster {config} (kube-system uid {identity})"),
    };
    let same = match (taken_on, machine_on) {
        (None, None) => true,
        (Some((_, a)), Some((_, b))) => a == b,
        _ => false,
    };
    (!same).then(|| {
        format!(
            "the snapshot was taken on {}, the Machine's disks are on {}",
            name(taken_on),
            name(machine_on)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(identity: &str, ack: Option<&str>, kubevirt: bool) -> Arc<Connection> {
        Arc::new(Connection {
            acknowledged: ack.map(str::to_owned),
            ..Connection::for_tests(identity, kubevirt)
        })
    }

    fn ready(identity: &str) -> Option<Health> {
        Some(Health::Ready(connection(identity, None, true)))
    }

    /// "Local", "Remote", or the reason waited for.
    fn word(s: &Site) -> String {
        match s {
            Site::Local => "Local".into(),
            Site::Remote(c) => format!("Remote {}", c.identity),
            Site::Wait(u) => u.reason.clone(),
        }
    }

    #[test]
    fn a_snapshot_is_restored_only_on_the_cluster_it_was_taken_on() {
        let (a, a2, b) = (
            Some(("dc1", "uid-a")),
            Some(("dc2", "uid-a")),
            Some(("dc1", "uid-b")),
        );
        // (taken on, Machine on, refused)
        let cases = [
            (None, None, false),
            (a, a, false),
            (a, a2, false), // two configs of one cluster
            (a, b, true),   // the config re-pointed
            (None, a, true),
            (a, None, true),
        ];
        for (taken, on, refused) in cases {
            assert_eq!(elsewhere(taken, on).is_some(), refused, "{taken:?} {on:?}");
        }
        let why = elsewhere(None, a).unwrap_or_default();
        assert!(
            why.contains("the operator's own cluster")
                && why.contains("cluster dc1 (kube-system uid uid-a)"),
            "{why}"
        );
    }

    #[tokio::test]
    async fn work_runs_where_the_machine_is_or_waits_saying_why() {
        let remote = Placement::Remote("dc1".into());
        let away = Some(Health::NotReady {
            reason: Reason::Unreachable,
            message: "no answer".into(),
            last: Some(connection("uid-a", None, true)),
        });
        let changed = Some(Health::NotReady {
            reason: Reason::ClusterChanged,
            message: "another cluster".into(),
            last: None,
        });
        let bare = Some(Health::Ready(connection("uid-a", None, false)));
        let moved_ack = Some(Health::Ready(connection("uid-b", Some("uid-b"), true)));
        let forbidden = Some("its namespaceSelector does not select".to_owned());
        let seen = |health: Option<Health>| Seen {
            health,
            exists: Some(true),
            ..Seen::default()
        };
        // (case, placement, seen, site)
        let cases = [
            ("a local Machine", Placement::Local, seen(None), "Local"),
            (
                "local, whatever the registry says",
                Placement::Local,
                Seen {
                    forbidden: forbidden.clone(),
                    ..seen(away.clone())
                },
                "Local",
            ),
            (
                "a ready cluster",
                remote.clone(),
                seen(ready("uid-a")),
                "Remote uid-a",
            ),
            (
                "made there",
                remote.clone(),
                Seen {
                    made_on: Some("uid-a"),
                    pinned: Some("uid-a"),
                    ..seen(ready("uid-a"))
                },
                "Remote uid-a",
            ),
            ("unreachable", remote.clone(), seen(away), "Unreachable"),
            (
                "a re-pointed config",
                remote.clone(),
                seen(changed),
                "ClusterChanged",
            ),
            (
                "no KubeVirt there",
                remote.clone(),
                seen(bare),
                "KubeVirtNotInstalled",
            ),
            (
                "no such config",
                remote.clone(),
                Seen {
                    exists: Some(false),
                    ..Seen::default()
                },
                "KubevirtConfigNotFound",
            ),
            ("not probed yet", remote.clone(), seen(None), NOT_PROBED),
            (
                "not listed yet",
                remote.clone(),
                Seen::default(),
                NOT_PROBED,
            ),
            (
                "outside the namespaceSelector",
                remote.clone(),
                Seen {
                    forbidden,
                    ..seen(ready("uid-a"))
                },
                "PlacementForbidden",
            ),
            (
                "the Machine was made on another cluster",
                remote.clone(),
                Seen {
                    made_on: Some("uid-a"),
                    ..seen(ready("uid-b"))
                },
                "ClusterChanged",
            ),
            (
                "a move acknowledged for the Machine",
                remote.clone(),
                Seen {
                    made_on: Some("uid-a"),
                    ..seen(moved_ack.clone())
                },
                "Remote uid-b",
            ),
            (
                "a snapshot taken on the old cluster, move acknowledged: not there",
                remote.clone(),
                Seen {
                    made_on: Some("uid-a"),
                    pinned: Some("uid-a"),
                    ..seen(moved_ack)
                },
                "ClusterChanged",
            ),
        ];
        for (case, placement, seen, want) in cases {
            assert_eq!(word(&site(&placement, seen)), want, "{case}");
        }
        let Site::Wait(why) = site(
            &remote,
            Seen {
                exists: Some(true),
                ..Seen::default()
            },
        ) else {
            panic!("waits");
        };
        assert_eq!(why.message, "cluster dc1: not probed yet");
        assert!(refused("PlacementForbidden"));
        assert!(!refused("Unreachable") && !refused("ClusterChanged"));
    }
}
