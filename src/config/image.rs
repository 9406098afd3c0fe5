//! Image references, by the grammar of `distribution/reference`, the one container runtimes
//! pull by.

use std::sync::LazyLock;

use regex::Regex;

/// `distribution/reference`'s anchored reference pattern (name, then `:tag` and `@digest`, each
/// captured), ASCII as in Go, where `\w` is `[0-9A-Za-z_]`. oci-spec's copy of it takes `\w`
/// as Unicode, which with the tag's `{0,127}` compiled to some 7 MB, held for the life of the
/// process to check one flag (issue 36's heap profile).
const REFERENCE: &str = concat!(
    // [domain/]: host name components separated by dots, an optional port
    r"^((?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])",
    r"(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?/)?",
    // path components: lower-case alphanumerics with single separators
    r"[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?",
    r"(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?)",
    // :tag
    r"(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?",
    // @algorithm:hex
    r"(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}))?$",
);

/// A repository name's longest, as in `distribution/reference`.
const NAME_MAX: usize = 255;

static PATTERN: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| Regex::new(REFERENCE));

/// Parses an image reference by the grammar of `distribution/reference`; the reference is
/// kept as written, for the runtime to complete (`pause` is Docker Hub's).
pub fn parse_image(s: &str) -> Result<String, String> {
    let refused = |why: &str| {
        format!(
            "{s:?} is not an image reference such as registry.k8s.io/pause:3.10 or \
             mirror.example.com:5000/k8s/pause@sha256:<64 hex digits> ({why})"
        )
    };
    let pattern = PATTERN.as_ref().map_err(|e| refused(&e.to_string()))?;
    let Some(parts) = pattern.captures(s) else {
        return Err(refused("invalid reference format"));
    };
    if parts.get(1).map_or(0, |n| n.len()) > NAME_MAX {
        return Err(refused(
            "repository name must not be more than 255 characters",
        ));
    }
    if let Some(digest) = parts.get(3) {
        let hex_len = match digest.as_str().split_once(':') {
            Some(("sha256", hex)) => (hex.len(), 64),
            Some(("sha384", hex)) => (hex.len(), 96),
            Some(("sha512", hex)) => (hex.len(), 128),
            _ => return Err(refused("unsupported digest algorithm")),
        };
        if hex_len.0 != hex_len.1 {
            return Err(refused("invalid checksum digest length"));
        }
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::parse_image;

    #[test]
    fn image_references_are_what_a_runtime_pulls() {
        for ok in [
            "registry.k8s.io/pause:3.10",
            "pause",
            "pause:3.10",
            "library/pause",
            "mirror.example.com:5000/k8s/pause:3.10",
            "localhost/pause",
            "localhost:5000/pause",
            "10.0.0.1:5000/k8s_images/pause-amd64:3.10",
            "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
            "registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
        ] {
            assert_eq!(parse_image(ok), Ok(ok.to_owned()), "{ok}");
        }
        for bad in [
            "",
            " ",
            "registry.k8s.io/pause 3.10",
            "Registry/Pause",
            "registry.k8s.io/Pause:3.10",
            "registry.k8s.io/pause:",
            "registry.k8s.io/pause:-3",
            // Go's `\w` is ASCII: a runtime refuses this tag.
            "registry.k8s.io/pause:3.10\u{e4}",
            "registry.k8s.io//pause",
            "registry.k8s.io/pause/",
            "https://registry.k8s.io/pause:3.10",
            "registry.k8s.io/pause@sha256:abc",
            "registry.k8s.io/pause@3.10",
            "registry.k8s.io:port/pause",
            "-registry.k8s.io/pause",
            // The grammar takes no IPv6 literals; a registry there needs a host name.
            "[fd00::1]:5000/pause:3.10",
        ] {
            let e = parse_image(bad).expect_err(bad);
            assert!(e.contains("is not an image reference"), "{bad}: {e}");
        }
    }
}
