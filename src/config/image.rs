//! A container image reference, as the container runtimes parse it (the grammar of
//! `distribution/reference`): `[host[:port]/]path[:tag][@algorithm:hex]`, e.g.
//! `registry.k8s.io/pause:3.10` or `mirror.example.com:5000/k8s/pause@sha256:…`.

/// Parses an image reference by the grammar of `distribution/reference` (through `oci-spec`);
/// the reference is kept as written, for the runtime to complete (`pause` is Docker Hub's).
pub fn parse_image(s: &str) -> Result<String, String> {
    match s.parse::<oci_spec::distribution::Reference>() {
        Ok(_) => Ok(s.to_owned()),
        Err(e) => Err(format!(
            "{s:?} is not an image reference such as registry.k8s.io/pause:3.10 or \
             mirror.example.com:5000/k8s/pause@sha256:<64 hex digits> ({e})"
        )),
    }
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
            "registry.k8s.io//pause",
            "registry.k8s.io/pause/",
            "https://registry.k8s.io/pause:3.10",
            "registry.k8s.io/pause@sha256:abc",
            "registry.k8s.io/pause@3.10",
            "registry.k8s.io:port/pause",
            "-registry.k8s.io/pause",
            // oci-spec does not take IPv6 literals; a registry there needs a host name.
            "[fd00::1]:5000/pause:3.10",
        ] {
            let e = parse_image(bad).expect_err(bad);
            assert!(e.contains("is not an image reference"), "{bad}: {e}");
        }
    }
}
