//! A serving certificate and its key, parsed from PEM into what rustls signs with.

use std::sync::Arc;

use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use rustls::sign::CertifiedKey;

#[derive(Debug, thiserror::Error)]
pub enum KeyPairError {
    #[error("certificate PEM holds no certificate")]
    NoCertificate,
    #[error("certificate PEM is malformed: {0}")]
    Certificate(String),
    #[error("private key PEM holds no usable private key: {0}")]
    Key(String),
    #[error("private key type is not supported: {0}")]
    KeyType(String),
    #[error("private key does not belong to the certificate: {0}")]
    Mismatch(String),
}

/// Parses a PEM certificate chain (leaf first) and a PEM private key (PKCS#8, SEC1 or PKCS#1).
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<CertifiedKey>, KeyPairError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| KeyPairError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(KeyPairError::NoCertificate);
    }
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| KeyPairError::Key(e.to_string()))?;
    let signer = any_supported_type(&key).map_err(|e| KeyPairError::KeyType(e.to_string()))?;
    let certified = CertifiedKey::new(chain, signer);
    certified
        .keys_match()
        .map_err(|e| KeyPairError::Mismatch(e.to_string()))?;
    Ok(Arc::new(certified))
}
