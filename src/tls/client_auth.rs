//! Optional client authentication on the webhook listener (`--client-ca-file`): only a caller
//! with a certificate signed by a CA of that file completes the TLS handshake. Configure
//! kube-apiserver to present one through its AdmissionConfiguration (docs/operator/security.md,
//! "Client authentication"), and nothing else in the cluster can ask the access check what a user
//! may do, or hold the webhook's connections.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;

/// The verifier of callers' certificates.
#[derive(Clone, Debug)]
pub struct ClientCa(pub Arc<dyn ClientCertVerifier>);

#[derive(Debug, thiserror::Error)]
pub enum ClientCaError {
    #[error("--client-ca-file (CLIENT_CA_FILE) {path:?}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--client-ca-file (CLIENT_CA_FILE) {path:?}: no PEM CERTIFICATE in it")]
    Empty { path: PathBuf },
    #[error("--client-ca-file (CLIENT_CA_FILE) {path:?}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The verifier for the PEM CA certificates in `pem` (read from `path`, named in errors).
pub fn from_pem(path: &Path, pem: &[u8]) -> Result<ClientCa, ClientCaError> {
    let invalid = |message: String| ClientCaError::Invalid {
        path: path.to_owned(),
        message,
    };
    let blocks = pem::parse_many(pem).map_err(|e| invalid(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    for block in blocks.iter().filter(|b| b.tag() == "CERTIFICATE") {
        roots
            .add(CertificateDer::from(block.contents().to_vec()))
            .map_err(|e| invalid(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(ClientCaError::Empty {
            path: path.to_owned(),
        });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    Ok(ClientCa(verifier))
}

/// [`from_pem`] of the file at `path`.
pub fn load(path: &Path) -> Result<ClientCa, ClientCaError> {
    let pem = std::fs::read(path).map_err(|source| ClientCaError::Read {
        path: path.to_owned(),
        source,
    })?;
    from_pem(path, &pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_loads_and_bad_ones_are_named() {
        let ca = rcgen::generate_simple_self_signed(vec!["ca".to_owned()]).expect("ca");
        let path = Path::new("/etc/ca.pem");
        assert!(from_pem(path, ca.cert.pem().as_bytes()).is_ok());
        let empty = from_pem(path, b"").expect_err("empty").to_string();
        assert_eq!(
            empty,
            r#"--client-ca-file (CLIENT_CA_FILE) "/etc/ca.pem": no PEM CERTIFICATE in it"#
        );
        let key_only = ca.signing_key.serialize_pem();
        assert!(from_pem(path, key_only.as_bytes()).is_err());
        let missing = load(Path::new("/nonexistent/ca.pem")).expect_err("missing");
        assert!(
            missing
                .to_string()
                .starts_with("--client-ca-file (CLIENT_CA_FILE)")
        );
    }
}
