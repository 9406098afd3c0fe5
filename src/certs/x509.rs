//! Certificates parsed into the few facts the decisions and `certs status` need.

use std::fmt;
use std::net::IpAddr;

use chrono::{DateTime, TimeDelta, Utc};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::config::RenewBefore;

/// How far not-before is set back from the moment of issuance, so that an API server whose clock
/// runs a little behind still accepts a certificate issued a moment ago.
pub const BACKDATE: TimeDelta = TimeDelta::minutes(5);

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CertError {
    #[error("no PEM certificate found")]
    NoCertificate,
    #[error("malformed PEM: {0}")]
    Pem(String),
    #[error("malformed certificate: {0}")]
    Der(String),
    #[error("validity period out of range")]
    Validity,
}

/// One parsed certificate; equality is byte equality of the DER.
#[derive(Clone)]
pub struct Cert {
    pub der: CertificateDer<'static>,
    pub subject: String,
    pub issuer: String,
    pub serial: String,
    pub not_before: DateTime<Utc>,
    pub not_after: DateTime<Utc>,
    pub is_ca: bool,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
}

impl PartialEq for Cert {
    fn eq(&self, other: &Self) -> bool {
        self.der == other.der
    }
}
impl Eq for Cert {}

impl fmt::Debug for Cert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cert")
            .field("subject", &self.subject)
            .field("serial", &self.serial)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl Cert {
    pub fn from_der(der: CertificateDer<'static>) -> Result<Self, CertError> {
        let facts = Facts::parse(&der)?;
        Ok(Cert {
            der,
            subject: facts.subject,
            issuer: facts.issuer,
            serial: facts.serial,
            not_before: facts.not_before,
            not_after: facts.not_after,
            is_ca: facts.is_ca,
            dns_names: facts.dns_names,
            ip_addresses: facts.ip_addresses,
        })
    }

    /// The first certificate in `pem` (a serving chain is leaf first).
    pub fn from_pem(pem: &[u8]) -> Result<Self, CertError> {
        match CertificateDer::pem_slice_iter(pem).next() {
            Some(Ok(der)) => Cert::from_der(der),
            Some(Err(e)) => Err(CertError::Pem(e.to_string())),
            None => Err(CertError::NoCertificate),
        }
    }

    /// Every certificate in `pem` that parses, and how many blocks did not. Reading stops at the
    /// first malformed block: past it the PEM framing cannot be trusted.
    pub fn all_from_pem(pem: &[u8]) -> (Vec<Cert>, usize) {
        let mut certs = Vec::new();
        let mut bad = 0;
        for item in CertificateDer::pem_slice_iter(pem) {
            match item
                .map_err(|e| CertError::Pem(e.to_string()))
                .and_then(Cert::from_der)
            {
                Ok(c) => certs.push(c),
                Err(_) => {
                    bad += 1;
                    break;
                }
            }
        }
        (certs, bad)
    }

    pub fn to_pem(&self) -> String {
        let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
        pem::encode_config(&pem::Pem::new("CERTIFICATE", self.der.to_vec()), config)
    }

    pub fn valid_at(&self, now: DateTime<Utc>) -> bool {
        self.not_before <= now && now < self.not_after
    }

    /// When it was issued, assuming the usual backdating; never after not-after.
    pub fn issued_at(&self) -> DateTime<Utc> {
        (self.not_before + BACKDATE).min(self.not_after)
    }

    /// When renewal starts: the renew-before window measured on the lifetime from issuance.
    pub fn renew_at(&self, renew_before: RenewBefore) -> DateTime<Utc> {
        let lifetime = self.not_after - self.issued_at();
        self.not_after - renew_before.before(lifetime).min(lifetime)
    }

    /// SANs for display: DNS names, then IP addresses.
    pub fn sans(&self) -> Vec<String> {
        self.dns_names
            .iter()
            .cloned()
            .chain(self.ip_addresses.iter().map(IpAddr::to_string))
            .collect()
    }
}

/// What [`Cert`] keeps, read while the parser borrows the DER.
struct Facts {
    subject: String,
    issuer: String,
    serial: String,
    not_before: DateTime<Utc>,
    not_after: DateTime<Utc>,
    is_ca: bool,
    dns_names: Vec<String>,
    ip_addresses: Vec<IpAddr>,
}

impl Facts {
    fn parse(der: &[u8]) -> Result<Self, CertError> {
        let (_, x) = X509Certificate::from_der(der).map_err(|e| CertError::Der(e.to_string()))?;
        let time = |t: i64| DateTime::<Utc>::from_timestamp(t, 0).ok_or(CertError::Validity);
        let mut dns_names = Vec::new();
        let mut ip_addresses = Vec::new();
        if let Ok(Some(san)) = x.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(d) => dns_names.push((*d).to_owned()),
                    GeneralName::IPAddress(b) => ip_addresses.extend(ip_from_bytes(b)),
                    _ => {}
                }
            }
        }
        Ok(Facts {
            subject: x.subject().to_string(),
            issuer: x.issuer().to_string(),
            serial: x.raw_serial_as_string(),
            not_before: time(x.validity().not_before.timestamp())?,
            not_after: time(x.validity().not_after.timestamp())?,
            is_ca: x.is_ca(),
            dns_names,
            ip_addresses,
        })
    }
}

fn ip_from_bytes(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => <[u8; 4]>::try_from(b).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(b).ok().map(IpAddr::from),
        _ => None,
    }
}
