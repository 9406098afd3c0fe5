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
    ControllerError, NetworkError, PhaseTemplate, StorageClass, VmStatus,
};

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
