//! Console and VNC sessions of the aggregated API (`subresources::sessions` names the reasons):
//!
//! - `kubevirt_operator_console_sessions{kind}`: sessions open on this replica.
//! - `kubevirt_operator_console_sessions_ended_total{kind, reason}`: sessions ended, by why.
//! - `kubevirt_operator_console_sessions_refused_total{kind, reason}`: sessions not opened at a
//!   limit, or while draining.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// console or vnc.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindReason {
    pub kind: &'static str,
    pub reason: &'static str,
}

/// Cheap to clone: every clone updates the same series.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub open: Family<KindLabel, Gauge>,
    pub ended: Family<KindReason, Counter>,
    pub refused: Family<KindReason, Counter>,
}

impl Metrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kubevirt_operator_console_sessions",
            "Console and VNC sessions open on this replica, by kind",
            self.open.clone(),
        );
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "kubevirt_operator_console_sessions_ended",
            "Console and VNC sessions ended, by kind and reason",
            self.ended.clone(),
        );
        registry.register(
            "kubevirt_operator_console_sessions_refused",
            "Console and VNC sessions refused at a limit or while draining, by kind and reason",
            self.refused.clone(),
        );
    }
}
