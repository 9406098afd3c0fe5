//! The leader's count of leftovers (`orphans::run`), registered once in the process registry
//! with [`Metrics::register`]:
//!
//! - `kubevirt_operator_orphans{cluster, kind}`: VMs, claims and DataVolumes proven ours that
//!   belong to no live Machine, as `check --orphans` lists them, per cluster (`local` or the
//!   KubevirtConfig's name) and kind; zeros included for every cluster looked at.
//! - `kubevirt_operator_orphans_unproven{cluster, kind}`: those with our labels or a proof
//!   annotation that verifies under no key of ours.
//! - `kubevirt_operator_orphans_checked{cluster}`: 1 when the last look at the cluster
//!   succeeded, 0 when it could not be looked at; such a cluster has no count above (never 0).
//!
//! Only the leader exports them; a replica that steps down drops them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ClusterKind {
    pub cluster: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ClusterLabel {
    pub cluster: String,
}

/// Cheap to clone: every clone updates the same series.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub leftovers: Family<ClusterKind, Gauge>,
    pub unproven: Family<ClusterKind, Gauge>,
    pub checked: Family<ClusterLabel, Gauge>,
}

impl Metrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kubevirt_operator_orphans",
            "VMs, claims and DataVolumes proven the operator's that belong to no live Machine, by cluster and kind (check --orphans lists them)",
            self.leftovers.clone(),
        );
        registry.register(
            "kubevirt_operator_orphans_unproven",
            "Objects with the operator's labels or a proof annotation that verifies under no key of its own, by cluster and kind",
            self.unproven.clone(),
        );
        registry.register(
            "kubevirt_operator_orphans_checked",
            "1 when the last look for leftovers on the cluster succeeded, 0 when it could not be looked at (then it has no orphan counts)",
            self.checked.clone(),
        );
    }

    /// Drops every series (the replica stopped leading).
    pub fn clear(&self) {
        self.leftovers.clear();
        self.unproven.clear();
        self.checked.clear();
    }
}
