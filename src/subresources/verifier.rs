//! The TLS client-certificate check of the aggregated API's listener: the chain must verify
//! against the front proxy's CA and the certificate's CN be an allowed name
//! ([`super::front_proxy::allowed_name`]). Until the ConfigMap has been read, and whenever it
//! names no usable CA, every handshake fails: nothing but kube-apiserver gets a connection.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::front_proxy::{self, FrontProxy};
use crate::tls::client_auth::{self, ClientCa};

/// The front proxy's CA and names in force, swapped as the ConfigMap changes.
#[derive(Debug, Default)]
pub struct FrontProxyVerifier {
    current: ArcSwapOption<Trusted>,
}

#[derive(Debug)]
struct Trusted {
    chain: ClientCa,
    proxy: FrontProxy,
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("requestheader-client-ca-file of kube-system/extension-apiserver-authentication: {0}")]
    Ca(#[from] client_auth::ClientCaError),
}

impl FrontProxyVerifier {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Trusts `proxy` from now on (new handshakes; open connections stay).
    pub fn trust(&self, proxy: FrontProxy) -> Result<(), TrustError> {
        let source = std::path::Path::new("requestheader-client-ca-file");
        let chain = client_auth::from_pem(source, proxy.client_ca_pem.as_bytes())?;
        self.current.store(Some(Arc::new(Trusted { chain, proxy })));
        Ok(())
    }

    /// The front proxy trusted now, if any (its header names are read per request).
    pub fn trusted(&self) -> Option<FrontProxy> {
        self.current.load().as_ref().map(|t| t.proxy.clone())
    }

    /// Trusts nothing: every handshake fails.
    pub fn forget(&self) {
        self.current.store(None);
    }

    fn algorithms() -> WebPkiSupportedAlgorithms {
        rustls::crypto::ring::default_provider().signature_verification_algorithms
    }
}

fn refuse(reason: &str) -> rustls::Error {
    rustls::Error::General(reason.to_owned())
}

/// The subject CN of a DER certificate, if it has one.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_owned)
}

impl ClientCertVerifier for FrontProxyVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints: kube-apiserver sends its one proxy certificate whatever is asked for.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let current = self.current.load();
        let trusted = current
            .as_ref()
            .ok_or_else(|| refuse("the front proxy's CA is not read yet"))?;
        trusted
            .chain
            .0
            .verify_client_cert(end_entity, intermediates, now)?;
        let cn = common_name(end_entity.as_ref());
        if !front_proxy::allowed_name(cn.as_deref(), &trusted.proxy.allowed_names) {
            return Err(refuse(
                "the client certificate's CN is not an allowed front-proxy name",
            ));
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &Self::algorithms())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &Self::algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        Self::algorithms().supported_schemes()
    }
}

#[cfg(test)]
mod tests;
