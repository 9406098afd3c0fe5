//! Certificate metrics. Register the handle once in the process registry with
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

/// `served` expiry when the certificate comes from files (`--cert-file`): every `every`, the
/// certificate the TLS server holds now, read from its slot, so any reload shows up.
pub async fn follow_served(
    slot: std::sync::Arc<crate::tls::CertSlot>,
    metrics: Metrics,
    every: std::time::Duration,
) {
    let mut seen: Option<std::sync::Arc<rustls::sign::CertifiedKey>> = None;
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let Some(current) = slot.current() else {
            continue;
        };
        if seen
            .as_ref()
            .is_some_and(|s| std::sync::Arc::ptr_eq(s, &current))
        {
            continue;
        }
        if let Some(leaf) = current.cert.first() {
            match super::x509::Cert::from_der(leaf.clone().into_owned()) {
                Ok(cert) => metrics.set_expiry("served", cert.not_after),
                Err(e) => tracing::warn!(error = %e, "served certificate unreadable"),
            }
        }
        seen = Some(current);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// File mode: the served certificate's not-after appears, and follows a reload.
    #[tokio::test(start_paused = true)]
    async fn served_expiry_follows_the_certificate_in_the_slot() {
        let metrics = Metrics::new();
        let slot = crate::tls::CertSlot::new();
        let key = |days: i64| {
            let mut params = rcgen::CertificateParams::new(vec!["a".to_owned()]).unwrap();
            params.not_after = rcgen::date_time_ymd(2030, 1, 1) + time::Duration::days(days);
            let kp = rcgen::KeyPair::generate().unwrap();
            let cert = params.self_signed(&kp).unwrap();
            let not_after = (params.not_after.unix_timestamp()) as i64;
            let ck = crate::tls::keypair::certified_key(
                cert.pem().as_bytes(),
                kp.serialize_pem().as_bytes(),
            )
            .unwrap();
            (ck, not_after)
        };
        let served = |m: &Metrics| {
            m.expiry
                .get_or_create(&CertificateLabel {
                    certificate: "served".into(),
                })
                .get()
        };
        let (first, first_after) = key(0);
        slot.store(first);
        let task = tokio::spawn(follow_served(
            slot.clone(),
            metrics.clone(),
            std::time::Duration::from_secs(1),
        ));
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        assert_eq!(served(&metrics), first_after);
        let (second, second_after) = key(10);
        slot.store(second);
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert_eq!(served(&metrics), second_after);
        task.abort();
    }

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
