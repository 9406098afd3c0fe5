//! A KubevirtConfig's kubeconfig, read from its Secret's data and checked (pure). Credentials
//! must be inline: an exec plugin or an auth provider would run a command, and a file path would
//! read a file, inside the operator on behalf of whoever may write the Secret.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use kube::config::Kubeconfig;
use ring::digest::{SHA256, digest};

use crate::api::kubevirt_config::{KUBECONFIG_KEY, KubevirtConfigSpec};

/// Why a Secret holds no usable kubeconfig.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    #[error("the Secret has no key {KUBECONFIG_KEY:?} (keys: {0})")]
    KeyMissing(String),
    #[error("the kubeconfig is not valid: {0}")]
    Invalid(String),
}

/// The kubeconfig under [`KUBECONFIG_KEY`], parsed and checked, and its raw bytes (for the
/// revision).
pub fn read(data: Option<&BTreeMap<String, ByteString>>) -> Result<(Kubeconfig, &[u8]), Unusable> {
    let Some(raw) = data.and_then(|d| d.get(KUBECONFIG_KEY)) else {
        let keys: Vec<&str> = data
            .into_iter()
            .flat_map(|d| d.keys().map(String::as_str))
            .collect();
        let keys = if keys.is_empty() {
            "none".to_owned()
        } else {
            keys.join(", ")
        };
        return Err(Unusable::KeyMissing(keys));
    };
    let text =
        std::str::from_utf8(&raw.0).map_err(|_| Unusable::Invalid("not UTF-8 text".to_owned()))?;
    let kubeconfig =
        Kubeconfig::from_yaml(text).map_err(|e| Unusable::Invalid(redact(&e.to_string())))?;
    check(&kubeconfig).map_err(Unusable::Invalid)?;
    Ok((kubeconfig, &raw.0))
}

/// A parse error without the input it quotes: its first line only (the parser adds the source
/// line under it), with quoted text longer than one character replaced, so a token in a wrong
/// place never reaches the status or the logs. The error and its line and column stay.
pub fn redact(error: &str) -> String {
    let first = error.lines().next().unwrap_or_default();
    let mut out = String::with_capacity(first.len());
    let mut rest = first;
    while let Some(start) = rest.find(['"', '\'', '`']) {
        let quote = rest[start..].chars().next().unwrap_or('"');
        out.push_str(&rest[..=start]);
        let after = &rest[start + 1..];
        match after.find(quote) {
            Some(end) if after[..end].chars().count() > 1 => {
                out.push('…');
                out.push(quote);
                rest = &after[end + 1..];
            }
            Some(end) => {
                out.push_str(&after[..=end]);
                rest = &after[end + 1..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// Refuses what would make the operator run a command or read a file.
pub fn check(kubeconfig: &Kubeconfig) -> Result<(), String> {
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        let name = &named.name;
        if user.exec.is_some() {
            return Err(format!(
                "user {name:?} uses an exec plugin, which is not allowed: put a token or a client certificate in the kubeconfig"
            ));
        }
        if user.auth_provider.is_some() {
            return Err(format!(
                "user {name:?} uses an auth provider, which is not allowed: put a token or a client certificate in the kubeconfig"
            ));
        }
        for (field, set) in [
            ("tokenFile", user.token_file.is_some()),
            ("client-certificate", user.client_certificate.is_some()),
            ("client-key", user.client_key.is_some()),
        ] {
            if set {
                return Err(format!(
                    "user {name:?} names a file ({field}), which is not allowed: inline it (token, client-certificate-data, client-key-data)"
                ));
            }
        }
    }
    for named in &kubeconfig.clusters {
        if named
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return Err(format!(
                "cluster {:?} names a file (certificate-authority), which is not allowed: use certificate-authority-data",
                named.name
            ));
        }
    }
    Ok(())
}

/// Changes when the kubeconfig's or the spec's content changes: 16 hex digits of a SHA-256.
pub fn revision(kubeconfig: &[u8], spec: &KubevirtConfigSpec) -> String {
    let spec = serde_json::to_vec(spec).unwrap_or_default();
    let mut input = Vec::with_capacity(kubeconfig.len() + spec.len() + 1);
    input.extend_from_slice(kubeconfig);
    input.push(0);
    input.extend_from_slice(&spec);
    digest(&SHA256, &input).as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    const GOOD: &str = "apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443', certificate-authority-data: Zm9v}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
";

    /// A Secret's data, and what reading it must give (Ok, or a fragment of the error).
    type Case = (
        Option<BTreeMap<String, ByteString>>,
        Result<(), &'static str>,
    );

    #[test]
    fn what_a_secret_holds() {
        let with = |user: &str| GOOD.replace("{token: abc}", user);
        let cases: Vec<Case> = vec![
            (Some(data(&[("kubeconfig", GOOD)])), Ok(())),
            (None, Err("has no key \"kubeconfig\" (keys: none)")),
            (
                Some(data(&[("config", GOOD), ("ca.crt", "x")])),
                Err("has no key \"kubeconfig\" (keys: ca.crt, config)"),
            ),
            (
                Some(data(&[("kubeconfig", "clusters: [unclosed")])),
                Err("the kubeconfig is not valid: failed to parse kubeconfig YAML"),
            ),
            (
                Some(data(&[(
                    "kubeconfig",
                    &with(
                        "{exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}}",
                    ),
                )])),
                Err("uses an exec plugin, which is not allowed"),
            ),
            (
                Some(data(&[(
                    "kubeconfig",
                    &with("{auth-provider: {name: oidc}}"),
                )])),
                Err("uses an auth provider"),
            ),
            (
                Some(data(&[(
                    "kubeconfig",
                    &with("{tokenFile: /var/run/secrets/token}"),
                )])),
                Err("names a file (tokenFile)"),
            ),
            (
                Some(data(&[("kubeconfig", &with("{client-key: /etc/key.pem}"))])),
                Err("names a file (client-key)"),
            ),
            (
                Some(data(&[(
                    "kubeconfig",
                    &GOOD.replace(
                        "certificate-authority-data: Zm9v",
                        "certificate-authority: /etc/ca",
                    ),
                )])),
                Err("names a file (certificate-authority)"),
            ),
        ];
        for (data, want) in cases {
            let got = read(data.as_ref()).map(drop).map_err(|e| e.to_string());
            match (got, want) {
                (Ok(()), Ok(())) => {}
                (Err(got), Err(want)) => assert!(got.contains(want), "{got:?} lacks {want:?}"),
                (got, want) => panic!("{got:?}, want {want:?}"),
            }
        }
        let binary = BTreeMap::from([("kubeconfig".to_owned(), ByteString(vec![0xff, 0xfe]))]);
        assert_eq!(
            read(Some(&binary)).map(drop),
            Err(Unusable::Invalid("not UTF-8 text".into()))
        );
    }

    /// The parser quotes the input under its message; none of it may reach the status.
    #[test]
    fn parse_errors_name_the_place_not_the_content() {
        let cases = [
            (
                "users: sekret-token-1",
                "line 1 column 8: expected sequence start",
            ),
            (
                "clusters: [unclosed sekret-2",
                "line 1 column 11: unclosed bracket '['",
            ),
            (
                "garbage sekret-4",
                "line 1 column 1: expected mapping start",
            ),
            (
                "users:\n- name: u\n  user: {token: [sekret-5]}",
                "line 3 column 17: expected string scalar",
            ),
        ];
        for (yaml, want) in cases {
            let data = BTreeMap::from([("kubeconfig".to_owned(), ByteString(yaml.into()))]);
            let message = read(Some(&data)).map(drop).unwrap_err().to_string();
            assert!(message.contains(want), "{message:?} lacks {want:?}");
            assert!(!message.contains("sekret"), "{message:?} quotes the Secret");
        }
        assert_eq!(
            redact("unknown field `sekret`, expected \"a\" or 'bc'\n1 | sekret"),
            "unknown field `…`, expected \"a\" or '…'"
        );
    }

    #[test]
    fn the_revision_follows_content_only() {
        let spec = KubevirtConfigSpec {
            kubeconfig_secret_ref: "dc1".into(),
            secret_namespace: "ops".into(),
            allow_cross_namespace_clones: None,
            namespace_selector: None,
        };
        let a = revision(b"one", &spec);
        assert_eq!(a.len(), 16);
        assert_eq!(a, revision(b"one", &spec), "stable");
        assert_ne!(a, revision(b"two", &spec), "a rotated kubeconfig");
        let clones = KubevirtConfigSpec {
            allow_cross_namespace_clones: Some(true),
            ..spec.clone()
        };
        assert_ne!(a, revision(b"one", &clones), "a changed spec");
        let selected = KubevirtConfigSpec {
            namespace_selector: Some(Default::default()),
            ..spec.clone()
        };
        assert_ne!(a, revision(b"one", &selected), "a namespaceSelector set");
    }
}
