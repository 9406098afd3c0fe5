//! Who may call the aggregated API, and as whom: pure decisions over what kube-apiserver
//! publishes in `kube-system/extension-apiserver-authentication` and what a request carries.
//! Every aggregated API server makes the same ones (k8s.io/apiserver's requestheader
//! authenticator): only the front proxy's certificate is trusted, and only then its headers.

use std::collections::BTreeMap;

use axum::http::HeaderMap;

/// The ConfigMap kube-apiserver writes for aggregated servers (namespace, name).
pub const CONFIG_MAP: (&str, &str) = ("kube-system", "extension-apiserver-authentication");

/// kube-apiserver's requestheader settings, as read from [`CONFIG_MAP`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontProxy {
    /// PEM CA certificates that sign the front proxy's client certificate.
    pub client_ca_pem: String,
    /// CNs the front proxy's certificate may have; empty: any the CA signed.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefixes: Vec<String>,
}

/// Why the ConfigMap gives no front proxy to trust.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: kube-apiserver runs without --requestheader-client-ca-file (the aggregation layer is not set up)"
    )]
    NoClientCa,
    #[error(
        "kube-system/extension-apiserver-authentication: {key} is not a JSON list of strings: {message}"
    )]
    BadList { key: &'static str, message: String },
    #[error(
        "kube-system/extension-apiserver-authentication names no requestheader-username-headers: no user could be read"
    )]
    NoUsernameHeaders,
}

fn list(data: &BTreeMap<String, String>, key: &'static str) -> Result<Vec<String>, ConfigError> {
    match data.get(key).map(|v| v.trim()) {
        None | Some("") => Ok(Vec::new()),
        Some(json) => serde_json::from_str(json).map_err(|e| ConfigError::BadList {
            key,
            message: e.to_string(),
        }),
    }
}

/// The front proxy the ConfigMap's `data` describes.
pub fn parse(data: &BTreeMap<String, String>) -> Result<FrontProxy, ConfigError> {
    let client_ca_pem = data
        .get("requestheader-client-ca-file")
        .filter(|pem| !pem.trim().is_empty())
        .ok_or(ConfigError::NoClientCa)?
        .clone();
    let username_headers = list(data, "requestheader-username-headers")?;
    if username_headers.is_empty() {
        return Err(ConfigError::NoUsernameHeaders);
    }
    Ok(FrontProxy {
        client_ca_pem,
        allowed_names: list(data, "requestheader-allowed-names")?,
        username_headers,
        group_headers: list(data, "requestheader-group-headers")?,
        extra_headers_prefixes: list(data, "requestheader-extra-headers-prefix")?,
    })
}

/// Whether a certificate the CA verified, with common name `cn`, is the front proxy's.
pub fn allowed_name(cn: Option<&str>, allowed: &[String]) -> bool {
    allowed.is_empty() || cn.is_some_and(|cn| allowed.iter().any(|a| a == cn))
}

/// The user kube-apiserver authenticated, as it hands them on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteUser {
    pub name: String,
    pub groups: Vec<String>,
    /// Extra attributes (keys lowercased and unescaped, as kube-apiserver sends them).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Why a request from the front proxy names no user (answered 401).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    #[error("no user in the front proxy's headers ({0}): only kube-apiserver may call this API")]
    NoUser(String),
}

/// The user in `headers`: the first non-empty username header, every group header's values,
/// and the extras under each prefix.
pub fn user(headers: &HeaderMap, proxy: &FrontProxy) -> Result<RemoteUser, Refusal> {
    let values = |name: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let name = proxy
        .username_headers
        .iter()
        .flat_map(|h| values(h))
        .find(|v| !v.is_empty())
        .ok_or_else(|| Refusal::NoUser(proxy.username_headers.join(", ")))?;
    let groups = proxy.group_headers.iter().flat_map(|h| values(h)).collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (header, value) in headers {
        let lower = header.as_str();
        let Some(key) = proxy
            .extra_headers_prefixes
            .iter()
            .find_map(|p| lower.strip_prefix(&p.to_ascii_lowercase()))
        else {
            continue;
        };
        if let Ok(value) = value.to_str() {
            extra
                .entry(unescape(key).to_ascii_lowercase())
                .or_default()
                .push(value.to_owned());
        }
    }
    Ok(RemoteUser {
        name,
        groups,
        extra,
    })
}

/// Percent-decoding of an extra's key (kube-apiserver escapes what a header name cannot hold);
/// a malformed escape is kept as it is.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
