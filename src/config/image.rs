//! A container image reference, as the container runtimes parse it (the grammar of
//! `distribution/reference`): `[host[:port]/]path[:tag][@algorithm:hex]`, e.g.
//! `registry.k8s.io/pause:3.10` or `mirror.example.com:5000/k8s/pause@sha256:…`.

/// The longest repository name a registry takes.
const MAX_NAME: usize = 255;

/// Parses an image reference; the error says what is wrong with it.
pub fn parse_image(s: &str) -> Result<String, String> {
    let bad = |why: &str| {
        Err(format!(
            "{s:?} is not an image reference such as registry.k8s.io/pause:3.10: {why}"
        ))
    };
    let (rest, digest) = match s.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (s, None),
    };
    if let Some(d) = digest
        && !is_digest(d)
    {
        return bad("the digest after '@' must be algorithm:hex (sha256:… of 64 hex digits)");
    }
    // A tag follows the last ':' after the last '/' (a ':' before it is a registry's port).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag
        && !is_tag(t)
    {
        return bad(
            "the tag must be 1-128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
        );
    }
    if name.is_empty() || name.len() > MAX_NAME {
        return bad("the name must be 1-255 characters");
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    let first = parts[0];
    let has_host = parts.len() > 1
        && (first.contains(['.', ':'])
            || first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase()));
    if has_host {
        if !is_host(first) {
            return bad("the registry must be a host name or address, with an optional :port");
        }
        parts.remove(0);
    }
    if !parts.iter().all(|p| is_path_component(p)) {
        return bad(
            "each part of the path must be lower-case letters and digits, joined by '.', '_', '__' or '-'",
        );
    }
    Ok(s.to_owned())
}

fn is_tag(t: &str) -> bool {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    (1..=128).contains(&t.len()) && t.bytes().all(ok) && !t.starts_with(['.', '-'])
}

fn is_digest(d: &str) -> bool {
    let Some((algorithm, hex)) = d.split_once(':') else {
        return false;
    };
    let algorithm_ok = algorithm.split(['+', '.', '_', '-']).all(|c| {
        c.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && c.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    algorithm_ok && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_host(h: &str) -> bool {
    let port_ok = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = h.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return false;
        };
        return v6.parse::<std::net::Ipv6Addr>().is_ok()
            && (after.is_empty() || after.strip_prefix(':').is_some_and(port_ok));
    }
    let (host, port) = match h.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (h, None),
    };
    port.is_none_or(port_ok)
        && !host.is_empty()
        && host.split('.').all(|c| {
            !c.is_empty()
                && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !c.starts_with('-')
                && !c.ends_with('-')
        })
}

/// Lower-case letters and digits, joined by one separator at a time: '.', '_', '__' or any
/// run of '-'.
fn is_path_component(p: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = p.as_bytes();
    if bytes.first().is_none_or(|b| !alnum(*b)) || bytes.last().is_none_or(|b| !alnum(*b)) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &p[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-')) {
            return false;
        }
    }
    true
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
            "[fd00::1]:5000/pause:3.10",
            "[fd00::1]/pause",
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
            "registry.k8s.io//pause",
            "registry.k8s.io/pause/",
            "https://registry.k8s.io/pause:3.10",
            "registry.k8s.io/pause@sha256:abc",
            "registry.k8s.io/pause@3.10",
            "registry.k8s.io:port/pause",
            "-registry.k8s.io/pause",
        ] {
            let e = parse_image(bad).expect_err(bad);
            assert!(e.contains("is not an image reference"), "{bad}: {e}");
        }
    }
}
