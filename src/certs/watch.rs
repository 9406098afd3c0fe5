//! Every replica: watch the serving Secret and put each valid pair it holds into the TLS
//! server's [`CertSlot`]. New handshakes get the new certificate; open connections keep theirs.
//! A deleted, emptied or corrupted Secret is reported and the last good certificate keeps
//! serving until the leader writes a good one again.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client};

use super::metrics::Metrics;
use super::x509::Cert;
use super::{SERVING_SECRET, TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY};
use crate::tls::CertSlot;
use crate::tls::keypair::certified_key;

/// What loading one version of the Secret did.
#[derive(Debug, PartialEq, Eq)]
pub enum Loaded {
    /// A new certificate now serves new handshakes.
    Swapped,
    /// The same certificate as already served.
    Unchanged,
    /// Not a usable pair; the previous certificate keeps serving.
    Refused(String),
}

/// Loads `secret`'s pair into `slot` unless it is broken or already there.
pub fn load(secret: &Secret, slot: &CertSlot, metrics: &Metrics) -> Loaded {
    let get = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|v| v.0.as_slice())
            .filter(|v| !v.is_empty())
    };
    let (Some(cert), Some(key)) = (get(TLS_CERT_KEY), get(TLS_PRIVATE_KEY_KEY)) else {
        metrics.reloaded(false);
        return Loaded::Refused(format!("no {TLS_CERT_KEY} or {TLS_PRIVATE_KEY_KEY}"));
    };
    let certified = match certified_key(cert, key) {
        Ok(c) => c,
        Err(e) => {
            metrics.reloaded(false);
            return Loaded::Refused(e.to_string());
        }
    };
    let leaf = certified
        .end_entity_cert()
        .ok()
        .map(|c| c.clone().into_owned());
    let current = slot.current();
    let current_leaf = current.as_ref().and_then(|c| c.end_entity_cert().ok());
    if leaf.is_some() && leaf.as_ref() == current_leaf {
        return Loaded::Unchanged;
    }
    slot.store(certified);
    metrics.reloaded(true);
    if let Some(c) = leaf.and_then(|der| Cert::from_der(der).ok()) {
        metrics.set_expiry("served", c.not_after);
        tracing::info!(serial = %c.serial, not_after = %c.not_after, "serving a new webhook certificate");
    }
    Loaded::Swapped
}

/// Watches the serving Secret in `namespace` and feeds `slot`, until the task is dropped.
/// `slot.is_loaded()` turns true with the first good pair (readiness).
pub async fn serve_from_secret(
    client: Client,
    namespace: String,
    slot: Arc<CertSlot>,
    metrics: Metrics,
) {
    let secrets: Api<Secret> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={SERVING_SECRET}"));
    let mut events = watcher(secrets, config).default_backoff().boxed();
    let mut seen = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Apply(s) | Event::InitApply(s)) => {
                seen = true;
                if let Loaded::Refused(why) = load(&s, &slot, &metrics) {
                    tracing::warn!(secret = SERVING_SECRET, %namespace, reason = %why, "serving Secret holds no usable certificate; keeping the current one");
                }
            }
            Ok(Event::Delete(_)) => {
                tracing::warn!(secret = SERVING_SECRET, %namespace, "serving Secret deleted; keeping the current certificate until it is recreated");
            }
            Ok(Event::Init) => seen = false,
            Ok(Event::InitDone) if !seen => {
                tracing::info!(secret = SERVING_SECRET, %namespace, "no serving Secret yet; waiting for the leader to create it");
            }
            Ok(Event::InitDone) => {}
            Err(e) => {
                tracing::warn!(error = %e, secret = SERVING_SECRET, "watching the serving Secret failed; retrying");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::{TimeDelta, Utc};
    use k8s_openapi::ByteString;

    use super::*;
    use crate::certs::config::{CertificateArgs, Settings};
    use crate::certs::issue::{issue_ca, issue_serving};

    fn secret(cert: &str, key: &str) -> Secret {
        Secret {
            data: Some(BTreeMap::from([
                (
                    TLS_CERT_KEY.to_owned(),
                    ByteString(cert.as_bytes().to_vec()),
                ),
                (
                    TLS_PRIVATE_KEY_KEY.to_owned(),
                    ByteString(key.as_bytes().to_vec()),
                ),
            ])),
            ..Secret::default()
        }
    }

    #[test]
    fn swaps_good_pairs_and_keeps_the_last_good_one() {
        crate::tls::install_crypto_provider();
        let now = Utc::now();
        let names = Settings::new("ns", None, CertificateArgs::default().lifetimes().unwrap())
            .unwrap()
            .serving_names();
        let ca = issue_ca(now, TimeDelta::hours(1)).unwrap();
        let a = issue_serving(&ca, &names, now, TimeDelta::minutes(10)).unwrap();
        let b = issue_serving(&ca, &names, now, TimeDelta::minutes(10)).unwrap();
        let slot = CertSlot::new();
        let m = Metrics::new();
        assert!(!slot.is_loaded());
        assert_eq!(
            load(&secret(&a.cert_pem, &a.key_pem), &slot, &m),
            Loaded::Swapped
        );
        assert!(slot.is_loaded());
        assert_eq!(
            load(&secret(&a.cert_pem, &a.key_pem), &slot, &m),
            Loaded::Unchanged
        );
        let served = |slot: &CertSlot| {
            let current = slot.current().unwrap();
            current.end_entity_cert().unwrap().clone().into_owned()
        };
        let first = served(&slot);
        // Mismatched key, garbage, empty: refused, the first pair still serves.
        assert!(matches!(
            load(&secret(&a.cert_pem, &b.key_pem), &slot, &m),
            Loaded::Refused(_)
        ));
        assert!(matches!(
            load(&secret("garbage", "garbage"), &slot, &m),
            Loaded::Refused(_)
        ));
        assert!(matches!(
            load(&Secret::default(), &slot, &m),
            Loaded::Refused(_)
        ));
        assert_eq!(served(&slot), first);
        assert_eq!(
            load(&secret(&b.cert_pem, &b.key_pem), &slot, &m),
            Loaded::Swapped
        );
        assert_ne!(served(&slot), first);
    }
}
