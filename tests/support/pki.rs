//! The control plane's own PKI, made with rcgen: a serving CA and the API server's certificate,
//! a client CA (so new users can be minted while the API server runs) and the service-account
//! key pair. ECDSA P-256 throughout, which Go 1.15 and rustls both accept.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// A client identity for the API server: CN is the user name, each O a group.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Files the API server reads, and the client CA used to mint users.
pub struct Pki {
    pub ca_pem: String,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub client_ca_cert: PathBuf,
    pub sa_public: PathBuf,
    pub sa_private: PathBuf,
    /// The front proxy (aggregator) PKI: kube-apiserver presents `front_proxy_client_*` to
    /// aggregated API servers, who verify it against `front_proxy_ca_cert`
    /// (`--requestheader-client-ca-file`).
    pub front_proxy_ca_cert: PathBuf,
    pub front_proxy_client_cert: PathBuf,
    pub front_proxy_client_key: PathBuf,
    /// PEM of the front-proxy CA, and a CA key to mint other certificates it signs (a forged
    /// front proxy with the wrong name, in tests).
    pub front_proxy_ca_pem: String,
    front_proxy_ca_key_pem: String,
    client_ca_pem: String,
    client_ca_key_pem: String,
}

/// Valid from a year ago (clock skew never matters) for ten years.
fn validity(params: &mut CertificateParams) {
    let year = 1970
        + (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            / 31_556_952) as i32;
    params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
}

fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params);
    params
}

fn write(dir: &Path, name: &str, contents: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// A private key, readable by its owner only (0600), as kube-apiserver's own keys are.
pub fn write_private(dir: &Path, name: &str, contents: &str) -> Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let path = dir.join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    // `mode` applies to new files only; an older file keeps its bits unless set here.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(contents.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

impl Pki {
    pub fn generate(dir: &Path) -> Result<Pki> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;

        let ca_key = KeyPair::generate().context("generating the serving CA key")?;
        let ca_params = ca_params("control-plane-test-ca");
        let ca_cert = ca_params
            .self_signed(&ca_key)
            .context("self-signing the serving CA")?;
        let ca = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate().context("generating the API server key")?;
        let mut serving = CertificateParams::new(vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            "10.0.0.1".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
        ])
        .context("API server certificate SANs")?;
        serving.distinguished_name = DistinguishedName::new();
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut serving);
        let serving_cert = serving
            .signed_by(&serving_key, &ca)
            .context("signing the API server certificate")?;

        let client_ca_key = KeyPair::generate().context("generating the client CA key")?;
        let client_ca_cert = ca_params_signed("control-plane-test-client-ca", &client_ca_key)?;

        let sa_key = KeyPair::generate().context("generating the service-account key")?;

        let front_ca_key = KeyPair::generate().context("generating the front-proxy CA key")?;
        let front_ca_pem = ca_params_signed("control-plane-test-front-proxy-ca", &front_ca_key)?;
        let front_ca_key_pem = front_ca_key.serialize_pem();
        let (front_cert, front_key) =
            sign_client(&front_ca_pem, &front_ca_key_pem, FRONT_PROXY_CLIENT, &[])?;

        Ok(Pki {
            ca_pem: ca_cert.pem(),
            serving_cert: write(dir, "apiserver.crt", &serving_cert.pem())?,
            serving_key: write_private(dir, "apiserver.key", &serving_key.serialize_pem())?,
            client_ca_cert: write(dir, "client-ca.crt", &client_ca_cert)?,
            sa_public: write(dir, "sa.pub", &sa_key.public_key_pem())?,
            sa_private: write_private(dir, "sa.key", &sa_key.serialize_pem())?,
            front_proxy_ca_cert: write(dir, "front-proxy-ca.crt", &front_ca_pem)?,
            front_proxy_client_cert: write(dir, "front-proxy-client.crt", &front_cert)?,
            front_proxy_client_key: write_private(dir, "front-proxy-client.key", &front_key)?,
            front_proxy_ca_pem: front_ca_pem,
            front_proxy_ca_key_pem: front_ca_key_pem,
            client_ca_pem: client_ca_cert,
            client_ca_key_pem: client_ca_key.serialize_pem(),
        })
    }

    /// Issues a client certificate for `name` in `groups`. The API server trusts it at once: it
    /// only checks the chain to the client CA it was started with.
    ///
    /// At most two groups: rcgen keeps one value per attribute type, so the second group is
    /// written as the same O attribute under a custom-type key (Go reads every O value).
    pub fn mint(&self, name: &str, groups: &[&str]) -> Result<User> {
        if groups.len() > 2 {
            bail!("mint_user({name}): at most two groups can be encoded, got {groups:?}");
        }
        let (cert_pem, key_pem) =
            sign_client(&self.client_ca_pem, &self.client_ca_key_pem, name, groups)?;
        Ok(User {
            name: name.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            cert_pem,
            key_pem,
        })
    }

    /// A client certificate (PEM certificate, PEM key) for `name` signed by the front-proxy
    /// CA: what kube-apiserver presents to aggregated servers, or with another name, a forgery.
    pub fn mint_front_proxy(&self, name: &str) -> Result<(String, String)> {
        sign_client(
            &self.front_proxy_ca_pem,
            &self.front_proxy_ca_key_pem,
            name,
            &[],
        )
    }
}

/// The CN of kube-apiserver's front-proxy client certificate (`--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// A client certificate for `name` in `groups` (at most two) signed by the CA in
/// `ca_pem`/`ca_key_pem`: (certificate PEM, key PEM).
fn sign_client(
    ca_pem: &str,
    ca_key_pem: &str,
    name: &str,
    groups: &[&str],
) -> Result<(String, String)> {
    let key = KeyPair::from_pem(ca_key_pem).context("loading the CA key")?;
    let issuer = Issuer::from_ca_cert_pem(ca_pem, key).context("loading the CA")?;
    let user_key = KeyPair::generate().context("generating a client key")?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    if let Some(first) = groups.first() {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *first);
    }
    if let Some(second) = groups.get(1) {
        params
            .distinguished_name
            .push(DnType::CustomDnType(vec![2, 5, 4, 10]), *second);
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    validity(&mut params);
    let cert = params
        .signed_by(&user_key, &issuer)
        .with_context(|| format!("signing the client certificate for {name}"))?;
    Ok((cert.pem(), user_key.serialize_pem()))
}

fn ca_params_signed(common_name: &str, key: &KeyPair) -> Result<String> {
    Ok(ca_params(common_name)
        .self_signed(key)
        .with_context(|| format!("self-signing {common_name}"))?
        .pem())
}
