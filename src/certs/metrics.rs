//! The served certificate's expiry, followed when it comes from files. The certificate metrics
//! themselves ([`Metrics`]) are registered with the others in `telemetry`.

use super::x509::Cert;
pub use crate::telemetry::certs::Metrics;

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
            match Cert::from_der(leaf.clone().into_owned()) {
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
    use crate::telemetry::certs::CertificateLabel;

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
}
