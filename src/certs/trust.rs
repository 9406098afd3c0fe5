//! Would a client holding this bundle accept this serving certificate for this name at this
//! time? Answered by rustls' WebPKI verifier (signature chain, validity, SAN, serverAuth) plus a
//! check WebPKI leaves out: kube-apiserver (Go) also refuses a chain whose root has expired.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{ServerName, UnixTime};

use super::x509::Cert;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TrustError {
    #[error("no CA in the bundle is valid now")]
    NoValidCa,
    #[error("{0:?} is not a valid server name")]
    ServerName(String),
    #[error("{0}")]
    Rejected(String),
}

/// Verifies `leaf` for `server_name` at `now` against the CAs in `bundle` that are valid then.
pub fn verify(
    leaf: &Cert,
    bundle: &[Cert],
    server_name: &str,
    now: DateTime<Utc>,
) -> Result<(), TrustError> {
    let mut roots = RootCertStore::empty();
    for ca in bundle.iter().filter(|c| c.valid_at(now)) {
        // A certificate WebPKI cannot use as an anchor simply does not vouch for anything.
        let _ = roots.add(ca.der.clone());
    }
    if roots.is_empty() {
        return Err(TrustError::NoValidCa);
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| TrustError::Rejected(e.to_string()))?;
    let name = ServerName::try_from(server_name.to_owned())
        .map_err(|_| TrustError::ServerName(server_name.to_owned()))?;
    let seconds = u64::try_from(now.timestamp()).unwrap_or(0);
    verifier
        .verify_server_cert(
            &leaf.der,
            &[],
            &name,
            &[],
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(seconds)),
        )
        .map(|_| ())
        .map_err(|e| TrustError::Rejected(e.to_string()))
}

/// Whether `leaf` was signed by `ca` (whatever the time or name).
pub fn signed_by(leaf: &Cert, ca: &Cert) -> bool {
    // Checking at a moment both are valid isolates the signature from the dates.
    let at = leaf.not_before.max(ca.not_before);
    let name = leaf
        .dns_names
        .first()
        .cloned()
        .or_else(|| leaf.ip_addresses.first().map(|ip| ip.to_string()));
    match name {
        Some(name) => verify(leaf, std::slice::from_ref(ca), &name, at).is_ok(),
        None => false,
    }
}
