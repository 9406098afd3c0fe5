//! Certificate metrics, counted by `certs` (and the served certificate's expiry by
//! `certs::metrics::follow_served`). Register the handle once in the process registry with
//! [`Metrics::register`]; the names carry their full `kubevirt_operator_` prefix, so register in
//! a registry without a prefix of its own.
//!
//! - `kubevirt_operator_certificate_expiry_timestamp_seconds{certificate}`: not-after (Unix
//!   seconds) of the stored `ca` and `serving` certificates (set by the leader), of the oldest CA
//!   still in the `bundle`, and of the certificate this replica is `served` with.
//! - `kubevirt_operator_certificate_rotations_total{certificate, reason}`: certificates issued by
//!   the leader (`ca`, `serving`), by why.
//! - `kubevirt_operator_certificate_reloads_total{result}`: serving-Secret changes this replica
//!   loaded (`loaded`) or refused and kept the previous certificate for (`invalid`).
//! - `kubevirt_operator_certificate_problems{object}`: 1 while an object cannot be maintained
//!   (a Secret or ConfigMap with our name that is not ours, a webhook configuration that is not
//!   installed or has no webhook calling us), else 0.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CertificateLabel {
    pub certificate: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RotationLabels {
    pub certificate: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabel {
    pub object: String,
}

/// Cheap to clone: every clone updates the same series.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub expiry: Family<CertificateLabel, Gauge>,
    pub rotations: Family<RotationLabels, Counter>,
    pub reloads: Family<ResultLabel, Counter>,
    pub problems: Family<ObjectLabel, Gauge>,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kubevirt_operator_certificate_expiry_timestamp_seconds",
            "Not-after of the certificate, in seconds since the Unix epoch",
            self.expiry.clone(),
        );
        registry.register(
            "kubevirt_operator_certificate_rotations",
            "Certificates issued by the leader, by certificate and reason",
            self.rotations.clone(),
        );
        registry.register(
            "kubevirt_operator_certificate_reloads",
            "Serving-Secret changes loaded or refused by this replica",
            self.reloads.clone(),
        );
        registry.register(
            "kubevirt_operator_certificate_problems",
            "1 while an object cannot be maintained (not the operator's, or not installed)",
            self.problems.clone(),
        );
    }

    pub fn set_expiry(&self, certificate: &str, not_after: chrono::DateTime<chrono::Utc>) {
        self.expiry
            .get_or_create(&CertificateLabel {
                certificate: certificate.to_owned(),
            })
            .set(not_after.timestamp());
    }

    pub fn rotated(&self, certificate: &str, reason: &str) {
        self.rotations
            .get_or_create(&RotationLabels {
                certificate: certificate.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn reloaded(&self, ok: bool) {
        let result = if ok { "loaded" } else { "invalid" };
        self.reloads
            .get_or_create(&ResultLabel {
                result: result.to_owned(),
            })
            .inc();
    }

    pub fn set_problem(&self, object: &str, present: bool) {
        self.problems
            .get_or_create(&ObjectLabel {
                object: object.to_owned(),
            })
            .set(i64::from(present));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_exposition_names() {
        let m = Metrics::new();
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.set_expiry(
            "ca",
            chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
        );
        m.rotated("serving", "renewal_due");
        m.reloaded(true);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains(
            "kubevirt_operator_certificate_expiry_timestamp_seconds{certificate=\"ca\"} 1700000000"
        ));
        assert!(out.contains(
            "kubevirt_operator_certificate_rotations_total{certificate=\"serving\",reason=\"renewal_due\"} 1"
        ));
        assert!(out.contains("kubevirt_operator_certificate_reloads_total{result=\"loaded\"} 1"));
    }
}
