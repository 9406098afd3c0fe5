//! A test CA and the serving certificates it signs, and clients that trust only it.

use std::sync::Arc;

use kubevirt_operator::tls::{install_crypto_provider, keypair};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};

/// A throwaway certificate authority (ECDSA P-256, like the operator's own).
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A serving certificate and its key, both PEM, as the webhook's `--cert-file/--key-file` hold them.
#[derive(Clone)]
pub struct ServingPair {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
}

impl TestCa {
    pub fn new(common_name: &str) -> Self {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A serving certificate for 127.0.0.1 and localhost; `common_name` tells certificates apart.
    pub fn issue(&self, common_name: &str) -> ServingPair {
        self.issue_for(common_name, &["127.0.0.1", "localhost"])
    }

    /// A certificate for the names (or IP addresses) `sans`.
    pub fn issue_for(&self, common_name: &str, sans: &[&str]) -> ServingPair {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).expect("SANs");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        let key = KeyPair::generate().expect("serving key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        ServingPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
        }
    }

    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert_der()).expect("CA is a valid root");
        roots
    }

    /// rustls client config trusting only this CA, limited to `versions`.
    pub fn client_config(
        &self,
        versions: &[&'static SupportedProtocolVersion],
    ) -> Arc<ClientConfig> {
        install_crypto_provider();
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(versions)
                .expect("protocol versions")
                .with_root_certificates(self.roots())
                .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // Full handshakes only: a resumed session would not show the server's current certificate.
        config.resumption = rustls::client::Resumption::disabled();
        Arc::new(config)
    }

    /// A reqwest client that trusts only this CA (no system roots) and so verifies the server.
    pub fn reqwest_client(&self) -> reqwest::Client {
        install_crypto_provider();
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(self.cert_pem().as_bytes()).expect("CA PEM"),
            )
            .https_only(true)
            .http1_only()
            .no_proxy()
            .build()
            .expect("client")
    }
}

impl ServingPair {
    pub fn certified_key(&self) -> Arc<rustls::sign::CertifiedKey> {
        keypair::certified_key(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
            .expect("a valid pair")
    }
}
