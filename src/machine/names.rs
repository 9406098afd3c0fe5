//! Name formats from Kubernetes (`k8s.io/apimachinery/pkg/util/validation`), with its messages.

const LABEL_MAX: usize = 63;
const SUBDOMAIN_MAX: usize = 253;

pub const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// Problems with `s` as a DNS-1123 label (empty when valid).
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX {
        errs.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !is_label(s) {
        errs.push(LABEL_MSG.to_owned());
    }
    errs
}

/// Problems with `s` as a DNS-1123 subdomain (empty when valid).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if s.is_empty() || !s.split('.').all(is_label) {
        errs.push(SUBDOMAIN_MSG.to_owned());
    }
    errs
}

/// Problems with `s` as a Secret or ConfigMap key (empty when valid).
pub fn config_key(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if s.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errs.push(CONFIG_KEY_MSG.to_owned());
    }
    if s == "." || s == ".." || s.starts_with("..") {
        errs.push("must not be '.' or '..' or start with '..'".to_owned());
    }
    errs
}

const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Problems with `s` as a qualified name (a label key, a taint key, a topology key): an optional
/// DNS-1123 subdomain prefix and `/`, then a name of at most 63 characters.
pub fn qualified_name(s: &str) -> Vec<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    let mut errs = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errs.push("prefix part must be non-empty".to_owned());
        } else {
            errs.extend(
                dns1123_subdomain(prefix)
                    .into_iter()
                    .map(|e| format!("prefix part {e}")),
            );
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_MAX {
        errs.push(format!(
            "name part must be no more than {LABEL_MAX} characters"
        ));
    }
    if !name.is_empty() && !is_name_part(name) {
        errs.push(QUALIFIED_NAME_MSG.to_owned());
    }
    errs
}

/// Problems with `s` as a label value (empty is valid).
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX {
        errs.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !s.is_empty() && !is_name_part(s) {
        errs.push(LABEL_VALUE_MSG.to_owned());
    }
    errs
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            alnum(first)
                && alnum(last)
                && b.iter()
                    .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

/// A MAC address as six hex octets separated by ':' or '-', normalised to lower-case with ':'.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let sep = if s.contains('-') { '-' } else { ':' };
    let parts: Vec<&str> = s.split(sep).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut out = [0u8; 6];
    for (slot, part) in out.iter_mut().zip(parts) {
        // from_str_radix accepts a sign ("+2"); KubeVirt's net.ParseMAC does not.
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *slot = u8::from_str_radix(part, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        for ok in ["a", "root", "data-1", "0", "a".repeat(63).as_str()] {
            assert!(dns1123_label(ok).is_empty(), "{ok}");
        }
        for bad in ["", "Root", "-a", "a-", "a_b", "a.b"] {
            assert_eq!(dns1123_label(bad), vec![LABEL_MSG.to_owned()], "{bad}");
        }
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters".to_owned()]
        );
    }

    #[test]
    fn subdomains() {
        for ok in ["fast-ssd", "ceph.rbd.example.com", "a"] {
            assert!(dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        for bad in ["", "Fast", "a..b", ".a", "a.", "a_b"] {
            assert_eq!(
                dns1123_subdomain(bad),
                vec![SUBDOMAIN_MSG.to_owned()],
                "{bad}"
            );
        }
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            vec!["must be no more than 253 characters".to_owned()]
        );
        assert_eq!(dns1123_subdomain(&"A".repeat(254)).len(), 2);
    }

    #[test]
    fn config_keys() {
        for ok in ["userdata", "user-data.yaml", "USER_DATA"] {
            assert!(config_key(ok).is_empty(), "{ok}");
        }
        assert_eq!(config_key("a/b"), vec![CONFIG_KEY_MSG.to_owned()]);
        assert_eq!(
            config_key(".."),
            vec!["must not be '.' or '..' or start with '..'".to_owned()]
        );
        assert_eq!(config_key(""), vec![CONFIG_KEY_MSG.to_owned()]);
    }

    #[test]
    fn macs() {
        assert_eq!(
            parse_mac("52:54:00:12:34:56"),
            Some([0x52, 0x54, 0, 0x12, 0x34, 0x56])
        );
        assert_eq!(
            parse_mac("52-54-00-AB-cd-EF"),
            Some([0x52, 0x54, 0, 0xab, 0xcd, 0xef])
        );
        for bad in [
            "",
            "52:54:00:12:34",
            "52:54:00:12:34:56:78",
            "52:54:00:12:34:5g",
            "525:4:00:12:34:56",
            "52:54-00:12:34:56",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }
}
