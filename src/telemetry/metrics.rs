//! The operator's Prometheus metrics (SPEC.md, "Operations"), in one registry served as text.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseTemplate {
    pub phase: String,
    pub template: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Controller {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerError {
    pub controller: String,
    pub error_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VmStatus {
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DataVolumePhase {
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StorageClass {
    pub storage_class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NetworkError {
    pub error_type: String,
}

/// A node drain reaching a Machine's VM, by `EvictionRequested`'s reason (a fixed word).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Eviction {
    pub reason: String,
}

/// Restarts the budget rations, by `RestartPending`'s reason: `Restarting` (holding a slot) or
/// `RestartPending` (waiting in line).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RestartBudget {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookResult {
    pub webhook: &'static str,
    /// allowed, denied or error (undecodable request).
    pub result: &'static str,
}

/// A denial's reason: a Kubernetes StatusReason, bounded (`admission::denials`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookReason {
    pub webhook: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Webhook {
    pub webhook: &'static str,
}

/// Counted by the listeners themselves (`tls::listener`), registered here with the rest.
pub use crate::tls::listener::{ListenerRefusal, RefusedConnections};

#[derive(Clone)]
pub struct Buckets(fn() -> Histogram);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        (self.0)()
    }
}

fn seconds_buckets() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn admission_buckets() -> Histogram {
    // 10 µs .. ~80 ms: admission answers are microseconds; the API server's timeout is 5 s.
    Histogram::new(exponential_buckets(0.000_01, 2.0, 14))
}

/// Every metric, registered once. Cheap to clone handles out of (`Family` is an `Arc`).
pub struct Metrics {
    registry: Registry,
    pub machines: Family<PhaseTemplate, Gauge>,
    pub reconcile_duration: Family<Controller, Histogram, Buckets>,
    pub reconcile_errors: Family<ControllerError, Counter>,
    pub virtual_machines: Family<VmStatus, Gauge>,
    pub storage_provisioning: Family<StorageClass, Histogram, Buckets>,
    /// The operator's DataVolumes by CDI phase, and the mean progress of those under way.
    pub data_volumes: Family<DataVolumePhase, Gauge>,
    pub data_volume_progress: Gauge<f64, std::sync::atomic::AtomicU64>,
    pub network_configuration_errors: Family<NetworkError, Counter>,
    pub eviction_requests: Family<Eviction, Counter>,
    pub restarts: Family<RestartBudget, Gauge>,
    pub admission_requests: Family<WebhookResult, Counter>,
    pub admission_duration: Family<Webhook, Histogram, Buckets>,
    pub admission_denials: Family<WebhookReason, Counter>,
    pub listener_refused: RefusedConnections,
    /// Certificate expiry, rotations and reloads (`telemetry::certs`).
    pub certs: super::certs::Metrics,
    /// Leftovers per cluster, counted by the leader (`telemetry::orphans`).
    pub orphans: super::orphans::Metrics,
    /// Console and VNC sessions (`telemetry::sessions`).
    pub sessions: super::sessions::Metrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(super::process::ProcessCollector));
        let certs = super::certs::Metrics::new();
        certs.register(&mut registry);
        let orphans = super::orphans::Metrics::default();
        orphans.register(&mut registry);
        let sessions = super::sessions::Metrics::default();
        sessions.register(&mut registry);
        let machines = Family::default();
        registry.register(
            "kubevirt_operator_machines_total",
            "Machines by phase and template",
            machines.clone(),
        );
        let reconcile_duration = Family::new_with_constructor(Buckets(seconds_buckets));
        registry.register(
            "kubevirt_operator_reconciliation_duration_seconds",
            "Time one reconcile takes",
            reconcile_duration.clone(),
        );
        let reconcile_errors = Family::default();
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "kubevirt_operator_reconciliation_errors",
            "Reconcile errors by type",
            reconcile_errors.clone(),
        );
        let virtual_machines = Family::default();
        registry.register(
            "kubevirt_operator_virtual_machines_total",
            "VirtualMachines created by the operator, by status",
            virtual_machines.clone(),
        );
        let storage_provisioning = Family::new_with_constructor(Buckets(seconds_buckets));
        registry.register(
            "kubevirt_operator_storage_provisioning_duration_seconds",
            "Time from PVC creation until it is bound",
            storage_provisioning.clone(),
        );
        let data_volumes = Family::default();
        registry.register(
            "kubevirt_operator_data_volumes",
            "The operator's CDI DataVolumes (disk imports and clones) by phase",
            data_volumes.clone(),
        );
        let data_volume_progress = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "kubevirt_operator_data_volume_progress_ratio",
            "Mean progress (0-1) of the operator's DataVolumes still importing or cloning",
            data_volume_progress.clone(),
        );
        let network_configuration_errors = Family::default();
        registry.register(
            "kubevirt_operator_network_configuration_errors",
            "Machines whose NetworkConfiguration is missing or unusable",
            network_configuration_errors.clone(),
        );
        let eviction_requests = Family::default();
        registry.register(
            "kubevirt_operator_eviction_requests",
            "Node drains that reached a Machine's VM (EvictionRequested appearing), by reason",
            eviction_requests.clone(),
        );
        let restarts = Family::default();
        registry.register(
            "kubevirt_operator_restarts",
            "Restarts under the restart budget, by reason: Restarting (holding a slot until the new VMI runs) or RestartPending (waiting in line)",
            restarts.clone(),
        );
        let admission_requests = Family::default();
        registry.register(
            "kubevirt_operator_admission_requests",
            "Admission requests by webhook and result",
            admission_requests.clone(),
        );
        let admission_duration = Family::new_with_constructor(Buckets(admission_buckets));
        registry.register(
            "kubevirt_operator_admission_duration_seconds",
            "Admission handling time by webhook",
            admission_duration.clone(),
        );
        let admission_denials = Family::default();
        registry.register(
            "kubevirt_operator_admission_denials",
            "Admission requests denied, by webhook and the Status reason given",
            admission_denials.clone(),
        );
        let listener_refused = RefusedConnections::default();
        registry.register(
            "kubevirt_operator_listener_refused",
            "Connections a listener refused at its global or per-client cap",
            listener_refused.clone(),
        );
        Metrics {
            registry,
            machines,
            reconcile_duration,
            reconcile_errors,
            virtual_machines,
            storage_provisioning,
            data_volumes,
            data_volume_progress,
            network_configuration_errors,
            eviction_requests,
            restarts,
            admission_requests,
            admission_duration,
            admission_denials,
            listener_refused,
            certs,
            orphans,
            sessions,
        }
    }

    /// Adds `kubevirt_operator_leader`, read from `is_leader` at every scrape.
    pub fn register_leader(&mut self, is_leader: impl Fn() -> bool + Send + Sync + 'static) {
        self.registry
            .register_collector(Box::new(super::process::LeaderCollector(Box::new(
                is_leader,
            ))));
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_gauge_is_read_at_scrape_time() {
        let leading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut m = Metrics::new();
        let flag = leading.clone();
        m.register_leader(move || flag.load(std::sync::atomic::Ordering::Relaxed));
        assert!(
            m.encode().contains("\nkubevirt_operator_leader 0\n"),
            "{}",
            m.encode()
        );
        leading.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(m.encode().contains("\nkubevirt_operator_leader 1\n"));
    }

    #[test]
    fn every_contracted_metric_is_exposed_with_its_labels() {
        let m = Metrics::new();
        m.machines
            .get_or_create(&PhaseTemplate {
                phase: "Running".into(),
                template: "small".into(),
            })
            .set(2);
        m.reconcile_duration
            .get_or_create(&Controller {
                controller: "machine".into(),
            })
            .observe(0.01);
        m.reconcile_errors
            .get_or_create(&ControllerError {
                controller: "machine".into(),
                error_type: "StorageClassNotFound".into(),
            })
            .inc();
        m.virtual_machines
            .get_or_create(&VmStatus {
                status: "Running".into(),
            })
            .set(1);
        m.storage_provisioning
            .get_or_create(&StorageClass {
                storage_class: "fast".into(),
            })
            .observe(1.0);
        m.network_configuration_errors
            .get_or_create(&NetworkError {
                error_type: "NetworkConfigurationNotFound".into(),
            })
            .inc();
        m.admission_requests
            .get_or_create(&WebhookResult {
                webhook: "mutate",
                result: "allowed",
            })
            .inc();
        m.admission_duration
            .get_or_create(&Webhook { webhook: "mutate" })
            .observe(0.00002);
        m.certs.set_expiry(
            "ca",
            chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
        );
        let text = m.encode();
        for line in [
            r#"kubevirt_operator_machines_total{phase="Running",template="small"} 2"#,
            r#"kubevirt_operator_reconciliation_duration_seconds_count{controller="machine"} 1"#,
            r#"kubevirt_operator_reconciliation_errors_total{controller="machine",error_type="StorageClassNotFound"} 1"#,
            r#"kubevirt_operator_virtual_machines_total{status="Running"} 1"#,
            r#"kubevirt_operator_storage_provisioning_duration_seconds_count{storage_class="fast"} 1"#,
            r#"kubevirt_operator_network_configuration_errors_total{error_type="NetworkConfigurationNotFound"} 1"#,
            r#"kubevirt_operator_admission_requests_total{webhook="mutate",result="allowed"} 1"#,
            r#"kubevirt_operator_admission_duration_seconds_count{webhook="mutate"} 1"#,
            r#"kubevirt_operator_certificate_expiry_timestamp_seconds{certificate="ca"} 1800000000"#,
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
    }
}
