//! What the reconciler reports to Prometheus (SPEC.md, "Operations"): gauges recounted from the
//! watch caches, counters and histograms recorded as reconciles happen.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::jiff::Timestamp;

use crate::api::Machine;
use crate::machine::Catalog;
use crate::telemetry::Metrics;
use crate::telemetry::metrics::{
    ControllerError, DataVolumePhase, NetworkError, PhaseTemplate, StorageClass, VmStatus,
};

use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::VirtualMachine;
use crate::reconciler::decide::problem::Problem;
use crate::reconciler::decide::status::phase::PENDING;
use crate::reconciler::store::packed::Packed;

pub const CONTROLLER: &str = "machine";

/// One count per problem, by its reason (the condition's and the Event's); NetworkConfiguration
/// problems also in `network_configuration_errors_total`, by reason too: a label bounded by
/// the reasons, never a user-chosen name.
pub fn record_problems(metrics: &Metrics, problems: &[Problem]) {
    for problem in problems {
        record_error(metrics, problem.reason());
        if let Problem::NetworkConfigurationNotFound { .. } | Problem::NetworkInvalid { .. } =
            problem
        {
            metrics
                .network_configuration_errors
                .get_or_create(&NetworkError {
                    error_type: problem.reason().to_owned(),
                })
                .inc();
        }
    }
}

pub fn record_error(metrics: &Metrics, error_type: &str) {
    metrics
        .reconcile_errors
        .get_or_create(&ControllerError {
            controller: CONTROLLER.to_owned(),
            error_type: error_type.to_owned(),
        })
        .inc();
}

/// Recounts Machines by phase and template, and the operator's VMs by status, from the caches.
pub fn refresh_gauges(
    metrics: &Metrics,
    machines: impl IntoIterator<Item = Arc<Packed<Machine>>>,
    vms: impl IntoIterator<Item = Arc<Packed<VirtualMachine>>>,
    catalog: &Catalog,
) {
    let mut by_phase: HashMap<PhaseTemplate, i64> = HashMap::new();
    for machine in machines {
        let brief = machine.brief();
        let phase = brief.phase.as_deref().unwrap_or(PENDING).to_owned();
        // resolve() names the default template when the spec names none.
        let template = brief
            .template
            .as_deref()
            .unwrap_or(catalog.default_name())
            .to_owned();
        *by_phase
            .entry(PhaseTemplate { phase, template })
            .or_default() += 1;
    }
    metrics.machines.clear();
    for (labels, n) in by_phase {
        metrics.machines.get_or_create(&labels).set(n);
    }
    let mut by_status: HashMap<String, i64> = HashMap::new();
    for vm in vms {
        let status = vm.brief().as_deref().unwrap_or("Unknown").to_owned();
        *by_status.entry(status).or_default() += 1;
    }
    metrics.virtual_machines.clear();
    for (status, n) in by_status {
        metrics
            .virtual_machines
            .get_or_create(&VmStatus { status })
            .set(n);
    }
}

/// CDI phases of DataVolumes whose import or clone is under way (progress is counted for these).
fn in_progress(phase: &str) -> bool {
    phase.ends_with("InProgress")
}

/// `45.20%` as 0.452; CDI reports `N/A` until it knows.
fn progress_ratio(progress: &str) -> Option<f64> {
    let percent: f64 = progress.trim().strip_suffix('%')?.trim().parse().ok()?;
    (0.0..=100.0).contains(&percent).then_some(percent / 100.0)
}

/// Recounts the operator's DataVolumes by CDI phase, and the mean progress of those under way.
/// Unpacked (their brief carries only their Machine), so on a slower timer than the other
/// gauges; one that does not unpack counts as `Unknown`.
pub fn refresh_data_volumes(
    metrics: &Metrics,
    data_volumes: impl IntoIterator<Item = Arc<Packed<DataVolume>>>,
) {
    let mut by_phase: HashMap<String, i64> = HashMap::new();
    let (mut sum, mut counted) = (0.0, 0u32);
    for dv in data_volumes {
        let status = dv.unpack().ok().and_then(|dv| dv.status);
        let phase = status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "Unknown".to_owned());
        if in_progress(&phase)
            && let Some(r) = status
                .as_ref()
                .and_then(|s| s.progress.as_deref())
                .and_then(progress_ratio)
        {
            sum += r;
            counted += 1;
        }
        *by_phase.entry(phase).or_default() += 1;
    }
    metrics.data_volumes.clear();
    for (phase, n) in by_phase {
        metrics
            .data_volumes
            .get_or_create(&DataVolumePhase { phase })
            .set(n);
    }
    let mean = if counted == 0 {
        0.0
    } else {
        sum / f64::from(counted)
    };
    metrics.data_volume_progress.set(mean);
}

/// Observes, once per claim, how long it took from creation until we first saw it Bound. A
/// claim is forgotten when its watch reports it deleted.
#[derive(Default)]
pub struct BindTimes {
    seen: Mutex<HashSet<String>>,
}

impl BindTimes {
    /// The claim with `uid` was deleted.
    pub fn forget(&self, uid: &str) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.remove(uid);
        }
    }

    pub fn len(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn observe(&self, metrics: &Metrics, pvc: &PersistentVolumeClaim, now: Timestamp) {
        let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let (Some(uid), Some(created)) = (
            pvc.metadata.uid.as_ref(),
            pvc.metadata.creation_timestamp.as_ref(),
        ) else {
            return;
        };
        if !bound {
            return;
        }
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        if !seen.insert(uid.clone()) {
            return;
        }
        let seconds = now.duration_since(created.0).as_secs_f64().max(0.0);
        let storage_class = pvc
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
            .unwrap_or_else(|| "default".to_owned());
        metrics
            .storage_provisioning
            .get_or_create(&StorageClass { storage_class })
            .observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PersistentVolumeClaimStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn bound_claim(uid: &str) -> PersistentVolumeClaim {
        let mut pvc = PersistentVolumeClaim::default();
        pvc.metadata.uid = Some(uid.into());
        pvc.metadata.creation_timestamp =
            Some(Time(Timestamp::from_second(1_700_000_000).unwrap()));
        pvc.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        pvc
    }

    #[test]
    fn data_volumes_by_phase_and_the_mean_progress_of_those_under_way() {
        let dv = |phase: &str, progress: &str| {
            let dv: DataVolume = serde_json::from_value(serde_json::json!({
                "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                "metadata": {"name": "x", "namespace": "n"},
                "spec": {},
                "status": {"phase": phase, "progress": progress}
            }))
            .unwrap();
            Arc::new(Packed::pack(&dv).unwrap())
        };
        let metrics = Metrics::new();
        refresh_data_volumes(
            &metrics,
            [
                dv("ImportInProgress", "40.00%"),
                dv("ImportInProgress", "N/A"),
                dv("CloneInProgress", "80%"),
                dv("Succeeded", "100.0%"),
                dv("", ""),
            ],
        );
        let text = metrics.encode();
        for line in [
            "kubevirt_operator_data_volumes{phase=\"ImportInProgress\"} 2",
            "kubevirt_operator_data_volumes{phase=\"Succeeded\"} 1",
            "kubevirt_operator_data_volumes{phase=\"Unknown\"} 1",
            "kubevirt_operator_data_volume_progress_ratio 0.6",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        refresh_data_volumes(&metrics, []);
        assert!(
            metrics
                .encode()
                .contains("kubevirt_operator_data_volume_progress_ratio 0.0")
        );
        assert_eq!(progress_ratio("101%"), None);
    }

    #[test]
    fn a_claim_is_observed_once_and_forgotten_when_deleted() {
        let (times, metrics) = (BindTimes::default(), Metrics::new());
        let now = Timestamp::from_second(1_700_000_010).unwrap();
        for uid in ["a", "a", "b"] {
            times.observe(&metrics, &bound_claim(uid), now);
        }
        assert_eq!(times.len(), 2);
        times.forget("a");
        times.forget("never-seen");
        assert_eq!(times.len(), 1);
    }
}
