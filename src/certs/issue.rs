//! Issuance with rcgen: an ECDSA P-256 CA, and serving certificates signed by it. The only
//! place keys are generated; everything here is deterministic given the clock except the keys.

use std::fmt;
use std::net::IpAddr;

use chrono::{DateTime, TimeDelta, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use super::config::ServingNames;
use super::x509::{BACKDATE, Cert};

#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("time out of range for a certificate")]
    Time,
    #[error("the CA expires at {ca_not_after}, before the serving certificate could start")]
    CaExpired { ca_not_after: DateTime<Utc> },
    #[error("{0:?} is not a valid DNS name for a certificate")]
    Name(String),
}

/// A certificate and its private key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct PemPair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl fmt::Debug for PemPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material, not even in debug logs.
        f.debug_struct("PemPair")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

fn offset(t: DateTime<Utc>) -> Result<time::OffsetDateTime, IssueError> {
    time::OffsetDateTime::from_unix_timestamp(t.timestamp()).map_err(|_| IssueError::Time)
}

/// A self-signed CA valid from `now - BACKDATE` to `now + lifetime`. Its common name carries the
/// issuance time so that `certs status` and logs tell generations apart.
pub fn issue_ca(now: DateTime<Utc>, lifetime: TimeDelta) -> Result<PemPair, IssueError> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!("kubevirt-operator-ca@{}", now.timestamp()),
    );
    params.distinguished_name = dn;
    // Path length 0: this CA signs serving certificates only, never another CA.
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = offset(now - BACKDATE)?;
    params.not_after = offset(now + lifetime)?;
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A serving certificate for `names`, signed by `ca`, valid from `now - BACKDATE` to
/// `now + lifetime` but never past the CA's own not-after.
pub fn issue_serving(
    ca: &PemPair,
    names: &ServingNames,
    now: DateTime<Utc>,
    lifetime: TimeDelta,
) -> Result<PemPair, IssueError> {
    let ca_cert = Cert::from_pem(ca.cert_pem.as_bytes())
        .map_err(|_| IssueError::Rcgen(rcgen::Error::CouldNotParseCertificate))?;
    let not_after = (now + lifetime).min(ca_cert.not_after);
    if not_after <= now {
        return Err(IssueError::CaExpired {
            ca_not_after: ca_cert.not_after,
        });
    }
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)?;

    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, names.verify_as.clone());
    params.distinguished_name = dn;
    params.subject_alt_names = san_list(names)?;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = offset(now - BACKDATE)?;
    params.not_after = offset(not_after)?;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn san_list(names: &ServingNames) -> Result<Vec<SanType>, IssueError> {
    let mut sans = Vec::with_capacity(names.dns.len() + names.ips.len());
    for d in &names.dns {
        let ia5 = d
            .as_str()
            .try_into()
            .map_err(|_| IssueError::Name(d.clone()))?;
        sans.push(SanType::DnsName(ia5));
    }
    sans.extend(names.ips.iter().copied().map(SanType::IpAddress));
    Ok(sans)
}

/// Whether `cert` carries exactly the SANs in `names` (order aside).
pub fn names_match(cert: &Cert, names: &ServingNames) -> bool {
    let mut have_dns = cert.dns_names.clone();
    let mut want_dns = names.dns.clone();
    have_dns.sort();
    want_dns.sort();
    let mut have_ip: Vec<IpAddr> = cert.ip_addresses.clone();
    let mut want_ip = names.ips.clone();
    have_ip.sort();
    want_ip.sort();
    have_dns == want_dns && have_ip == want_ip
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::config::{CertificateArgs, Settings};

    fn names() -> ServingNames {
        let l = CertificateArgs::default().lifetimes().unwrap();
        Settings::new("ns", Some("https://127.0.0.1:8443"), l)
            .unwrap()
            .serving_names()
    }

    #[test]
    fn ca_and_serving_certificate_fields() {
        let now = Utc::now();
        let ca = issue_ca(now, TimeDelta::hours(168)).unwrap();
        let ca_cert = Cert::from_pem(ca.cert_pem.as_bytes()).unwrap();
        assert!(ca_cert.is_ca);
        assert!(ca_cert.subject.starts_with("CN=kubevirt-operator-ca@"));
        assert_eq!(ca_cert.not_before.timestamp(), (now - BACKDATE).timestamp());
        assert_eq!(
            ca_cert.not_after.timestamp(),
            (now + TimeDelta::hours(168)).timestamp()
        );
        assert!(ca.key_pem.contains("PRIVATE KEY"));
        assert!(!format!("{ca:?}").contains("PRIVATE KEY"));

        let s = issue_serving(&ca, &names(), now, TimeDelta::hours(24)).unwrap();
        let leaf = Cert::from_pem(s.cert_pem.as_bytes()).unwrap();
        assert!(!leaf.is_ca);
        assert_eq!(leaf.issuer, ca_cert.subject);
        assert!(names_match(&leaf, &names()));
        assert_eq!(
            leaf.sans(),
            [
                "kubevirt-operator-webhook",
                "kubevirt-operator-webhook.ns",
                "kubevirt-operator-webhook.ns.svc",
                "kubevirt-operator-webhook.ns.svc.cluster.local",
                "127.0.0.1"
            ]
        );
        assert_eq!(
            leaf.not_after.timestamp(),
            (now + TimeDelta::hours(24)).timestamp()
        );
        // Valid from 5 minutes before issue: a replica whose clock runs fast still issues a
        // certificate kube-apiserver accepts at once.
        assert!(BACKDATE >= TimeDelta::minutes(5));
        assert_eq!(
            leaf.not_before.timestamp(),
            (now - TimeDelta::minutes(5)).timestamp()
        );
        // The key is P-256 and belongs to the certificate: rustls accepts the pair.
        crate::tls::keypair::certified_key(s.cert_pem.as_bytes(), s.key_pem.as_bytes()).unwrap();
        let (_, x) =
            <x509_parser::prelude::X509Certificate as x509_parser::prelude::FromDer<_>>::from_der(
                &leaf.der,
            )
            .unwrap();
        assert_eq!(
            x.public_key()
                .algorithm
                .parameters
                .as_ref()
                .map(|p| p.as_oid().unwrap().to_id_string()),
            Some("1.2.840.10045.3.1.7".to_owned()),
            "prime256v1"
        );
        let eku = x.extended_key_usage().unwrap().unwrap();
        assert!(eku.value.server_auth);
    }

    #[test]
    fn serving_never_outlives_its_ca() {
        let now = Utc::now();
        let ca = issue_ca(now - TimeDelta::hours(160), TimeDelta::hours(168)).unwrap();
        let ca_cert = Cert::from_pem(ca.cert_pem.as_bytes()).unwrap();
        let s = issue_serving(&ca, &names(), now, TimeDelta::hours(24)).unwrap();
        let leaf = Cert::from_pem(s.cert_pem.as_bytes()).unwrap();
        assert_eq!(leaf.not_after, ca_cert.not_after);

        let old = issue_ca(now - TimeDelta::hours(200), TimeDelta::hours(168)).unwrap();
        assert!(matches!(
            issue_serving(&old, &names(), now, TimeDelta::hours(24)),
            Err(IssueError::CaExpired { .. })
        ));
    }
}
