//! The stored objects, as read, classified into what the decisions need: missing, not ours,
//! unreadable (and why), or the parsed certificates. Pure.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use super::issue::PemPair;
use super::x509::Cert;
use super::{
    BUNDLE_KEY, CA_BUNDLE_WRITTEN_ANNOTATION, CA_CERT_KEY, ROTATE_ANNOTATION, TLS_CERT_KEY,
    TLS_PRIVATE_KEY_KEY,
};
use crate::tls::keypair::certified_key;

/// The objects as read from the API (None: not found).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub ca: Option<Secret>,
    pub serving: Option<Secret>,
    pub bundle: Option<ConfigMap>,
    pub mutating: Option<MutatingWebhookConfiguration>,
    pub validating: Option<ValidatingWebhookConfiguration>,
    /// Read only while the aggregated API is served (`Settings::api_service`).
    pub api_service: Option<APIService>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored<T> {
    Missing,
    /// A Secret or ConfigMap that exists without the managed-by label: never overwritten.
    Foreign,
    Unreadable(String),
    Ok(T),
}

impl<T> Stored<T> {
    pub fn ok(&self) -> Option<&T> {
        match self {
            Stored::Ok(t) => Some(t),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCa {
    pub cert: Cert,
    pub pair: PemPair,
    pub rotate_requested: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredServing {
    pub cert: Cert,
    /// The CA that signed it, as recorded beside it (`ca.crt`); kept in the bundle while valid.
    pub issuer_ca: Option<Cert>,
    pub rotate_requested: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBundle {
    pub cas: Vec<Cert>,
    /// PEM blocks that did not parse; their presence alone calls for a rewrite.
    pub malformed: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub ca: Stored<StoredCa>,
    pub serving: Stored<StoredServing>,
    pub bundle: Stored<StoredBundle>,
    pub mutating: Stored<MutatingWebhookConfiguration>,
    pub validating: Stored<ValidatingWebhookConfiguration>,
    pub api_service: Stored<APIService>,
}

pub fn observe(s: &Snapshot) -> Observed {
    Observed {
        ca: classify(s.ca.as_ref(), |o| &o.metadata, ca_state),
        serving: classify(s.serving.as_ref(), |o| &o.metadata, serving_state),
        bundle: classify(s.bundle.as_ref(), |o| &o.metadata, bundle_state),
        // Named by --webhook-configuration-name and installed by the chart or manifests, not
        // by us: the name is the claim, so there is no label to check (only webhooks that call
        // us are ever filled: webhook_config::fill).
        mutating: s.mutating.clone().map_or(Stored::Missing, Stored::Ok),
        validating: s.validating.clone().map_or(Stored::Missing, Stored::Ok),
        api_service: s.api_service.clone().map_or(Stored::Missing, Stored::Ok),
    }
}

/// When a webhook configuration's caBundle was written, as recorded on it (None: not recorded,
/// or not a time).
pub fn ca_bundle_written_at(meta: &ObjectMeta) -> Option<DateTime<Utc>> {
    let value = meta
        .annotations
        .as_ref()?
        .get(CA_BUNDLE_WRITTEN_ANNOTATION)?;
    DateTime::parse_from_rfc3339(value)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn classify<O, T>(
    object: Option<&O>,
    meta: impl Fn(&O) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    parse: impl Fn(&O) -> Result<T, String>,
) -> Stored<T> {
    let Some(o) = object else {
        return Stored::Missing;
    };
    if !super::is_managed(meta(o).labels.as_ref()) {
        return Stored::Foreign;
    }
    match parse(o) {
        Ok(t) => Stored::Ok(t),
        Err(why) => Stored::Unreadable(why),
    }
}

fn field<'a>(
    data: Option<&'a BTreeMap<String, ByteString>>,
    key: &str,
) -> Result<&'a [u8], String> {
    match data.and_then(|d| d.get(key)) {
        Some(v) if !v.0.is_empty() => Ok(&v.0),
        _ => Err(format!("no {key}")),
    }
}

fn rotate_requested(secret: &Secret) -> bool {
    secret
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ROTATE_ANNOTATION))
}

/// Certificate and key must parse and belong together: what rustls would need to use them.
fn pair(secret: &Secret) -> Result<(Cert, PemPair), String> {
    let cert_pem = field(secret.data.as_ref(), TLS_CERT_KEY)?;
    let key_pem = field(secret.data.as_ref(), TLS_PRIVATE_KEY_KEY)?;
    let cert = Cert::from_pem(cert_pem).map_err(|e| format!("{TLS_CERT_KEY}: {e}"))?;
    certified_key(cert_pem, key_pem)
        .map_err(|e| format!("{TLS_CERT_KEY}/{TLS_PRIVATE_KEY_KEY}: {e}"))?;
    let text = |b: &[u8], key: &str| {
        String::from_utf8(b.to_vec()).map_err(|_| format!("{key}: not UTF-8 PEM"))
    };
    Ok((
        cert,
        PemPair {
            cert_pem: text(cert_pem, TLS_CERT_KEY)?,
            key_pem: text(key_pem, TLS_PRIVATE_KEY_KEY)?,
        },
    ))
}

fn ca_state(secret: &Secret) -> Result<StoredCa, String> {
    let (cert, pair) = pair(secret)?;
    if !cert.is_ca {
        return Err(format!("{TLS_CERT_KEY}: not a CA certificate"));
    }
    Ok(StoredCa {
        cert,
        pair,
        rotate_requested: rotate_requested(secret),
    })
}

fn serving_state(secret: &Secret) -> Result<StoredServing, String> {
    let (cert, _) = pair(secret)?;
    let issuer_ca = field(secret.data.as_ref(), CA_CERT_KEY)
        .ok()
        .and_then(|pem| Cert::from_pem(pem).ok())
        .filter(|c| c.is_ca);
    Ok(StoredServing {
        cert,
        issuer_ca,
        rotate_requested: rotate_requested(secret),
    })
}

fn bundle_state(cm: &ConfigMap) -> Result<StoredBundle, String> {
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(BUNDLE_KEY))
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| format!("no {BUNDLE_KEY}"))?;
    let (cas, malformed) = Cert::all_from_pem(text.as_bytes());
    if cas.is_empty() {
        return Err(format!("{BUNDLE_KEY}: no readable certificate"));
    }
    Ok(StoredBundle { cas, malformed })
}
