//! What every snapshot controller shares: the settings, the per-scope context, and the words
//! for a cluster without KubeVirt's snapshot API.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use super::clock::Clock;
use crate::clusters::Registry;
use crate::reconciler::decide::evidence::OwnershipKey;
use crate::reconciler::run::watches::Scope;

/// How the snapshot controllers run.
#[derive(Clone)]
pub struct Settings {
    /// The namespaces watched (as the Machine reconciler's).
    pub scopes: Vec<Scope>,
    /// The operator's namespace, where its ownership key lives.
    pub namespace: String,
    /// The time schedules are judged at.
    pub clock: Arc<dyn Clock>,
    /// How often schedules are checked, and a running restore looked at again.
    pub tick: Duration,
    pub limits: Limits,
    /// The image of a restore's binder Pod (`--restore-pause-image`).
    pub pause_image: String,
    /// The remote clusters, as the Machine reconciler reaches them: a remote Machine's
    /// snapshots and restores run on its cluster.
    pub clusters: Registry,
    /// `--default-kubevirt-config` (the placement of a Machine never reconciled).
    pub default_kubevirt_config: Option<String>,
}

/// Bounds on the work snapshots make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The least time between two runs of one schedule (`--min-snapshot-interval`): a schedule
    /// firing more often is clamped to it.
    pub min_interval: Duration,
    /// Scheduled snapshots being taken at once at most, across every Machine
    /// (`--max-snapshots-in-flight`); more due ones wait for the next check.
    pub max_in_flight: usize,
    /// How long a snapshot waits for its Machine's VM in this cluster before it fails.
    pub pending_limit: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            min_interval: DEFAULT_MIN_INTERVAL,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            pending_limit: Duration::from_secs(30 * 60),
        }
    }
}

pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(15 * 60);
pub const DEFAULT_MAX_IN_FLIGHT: usize = 10;
/// Does nothing, and is on every node that runs Pods (the kubelet's own sandbox image).
pub const DEFAULT_PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// Shared by every reconcile of one scope.
pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub key: OwnershipKey,
    /// KubeVirt's snapshot API (VirtualMachineSnapshot, VirtualMachineRestore) is served.
    pub kubevirt: bool,
}

/// Why nothing can be snapshotted or restored without KubeVirt's snapshot API.
pub const NO_KUBEVIRT_SNAPSHOTS: &str = "KubeVirt's snapshot API (snapshot.kubevirt.io/v1beta1) \
    is not installed; restart the operator after installing it";

/// Schedules are minute-grained: checking at least every 30 s keeps them within the minute.
pub const MAX_TICK: Duration = Duration::from_secs(30);

/// How often schedules are checked for a reconcile interval: as often, at most every
/// [`MAX_TICK`], and not more often than every second.
pub fn tick_for(reconcile_interval: Duration) -> Duration {
    reconcile_interval.min(MAX_TICK).max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_are_checked_every_reconcile_interval_at_most_every_30_s() {
        let s = Duration::from_secs;
        for (interval, tick) in [
            (s(2), s(2)),
            (s(30), s(30)),
            (s(300), s(30)),
            (Duration::from_millis(100), s(1)),
        ] {
            assert_eq!(tick_for(interval), tick, "{interval:?}");
        }
    }
}
