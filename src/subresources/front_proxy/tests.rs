use super::*;

use axum::http::HeaderValue;

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// What kube-apiserver writes when started as tests/support starts it.
fn kubeadm_like() -> BTreeMap<String, String> {
    data(&[
        ("client-ca-file", "CLIENT CA"),
        ("requestheader-client-ca-file", "FRONT PROXY CA"),
        ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
        ("requestheader-username-headers", r#"["X-Remote-User"]"#),
        ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
        (
            "requestheader-extra-headers-prefix",
            r#"["X-Remote-Extra-"]"#,
        ),
    ])
}

fn proxy() -> FrontProxy {
    parse(&kubeadm_like()).expect("parses")
}

#[test]
fn the_config_map_is_read_or_its_fault_named() {
    let parsed = proxy();
    assert_eq!(parsed.client_ca_pem, "FRONT PROXY CA");
    assert_eq!(parsed.allowed_names, ["front-proxy-client"]);
    assert_eq!(parsed.username_headers, ["X-Remote-User"]);
    assert_eq!(parsed.group_headers, ["X-Remote-Group"]);
    assert_eq!(parsed.extra_headers_prefixes, ["X-Remote-Extra-"]);

    let without = |key: &str| {
        let mut d = kubeadm_like();
        d.remove(key);
        parse(&d).map(|_| ())
    };
    let with = |key: &str, value: &str| {
        let mut d = kubeadm_like();
        d.insert(key.to_owned(), value.to_owned());
        parse(&d).map(|_| ())
    };
    let cases = [
        (
            "no CA",
            without("requestheader-client-ca-file"),
            Err(ConfigError::NoClientCa),
        ),
        (
            "empty CA",
            with("requestheader-client-ca-file", " "),
            Err(ConfigError::NoClientCa),
        ),
        (
            "no username headers",
            without("requestheader-username-headers"),
            Err(ConfigError::NoUsernameHeaders),
        ),
        (
            "no allowed names: any",
            without("requestheader-allowed-names"),
            Ok(()),
        ),
        (
            "no extras",
            without("requestheader-extra-headers-prefix"),
            Ok(()),
        ),
    ];
    for (case, got, want) in cases {
        assert_eq!(got, want, "{case}");
    }
    let bad = with("requestheader-allowed-names", "front-proxy-client").expect_err("not JSON");
    assert!(
        bad.to_string()
            .contains("requestheader-allowed-names is not a JSON list of strings"),
        "{bad}"
    );
}

#[test]
fn only_an_allowed_name_is_the_front_proxy() {
    let allowed = vec!["front-proxy-client".to_owned(), "aggregator".to_owned()];
    let cases: [(Option<&str>, &[String], bool); 6] = [
        (Some("front-proxy-client"), &allowed, true),
        (Some("aggregator"), &allowed, true),
        (Some("alice"), &allowed, false),
        (Some("Front-Proxy-Client"), &allowed, false),
        (None, &allowed, false),
        // kube-apiserver's rule: no names listed, any certificate of the CA.
        (Some("anything"), &[], true),
    ];
    for (cn, allowed, want) in cases {
        assert_eq!(allowed_name(cn, allowed), want, "{cn:?} in {allowed:?}");
    }
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, HeaderValue::from_static(value));
    }
    map
}

#[test]
fn the_user_comes_from_the_front_proxys_headers() {
    let got = user(
        &headers(&[
            ("x-remote-user", "alice"),
            ("x-remote-group", "devs"),
            ("x-remote-group", "system:authenticated"),
            ("x-remote-extra-scopes", "a"),
            ("x-remote-extra-scopes", "b"),
            ("x-remote-extra-acme.com%2fproject", "p1"),
            ("x-remote-userx", "mallory"),
        ]),
        &proxy(),
    )
    .expect("a user");
    assert_eq!(got.name, "alice");
    assert_eq!(got.groups, ["devs", "system:authenticated"]);
    assert_eq!(got.extra["scopes"], ["a", "b"]);
    assert_eq!(got.extra["acme.com/project"], ["p1"]);
    assert_eq!(got.extra.len(), 2);

    let refused = Refusal::NoUser("X-Remote-User".to_owned());
    let cases: [(&str, HeaderMap); 3] = [
        (
            "no user header",
            headers(&[("x-remote-group", "system:masters")]),
        ),
        ("an empty user", headers(&[("x-remote-user", "")])),
        ("another header", headers(&[("impersonate-user", "admin")])),
    ];
    for (case, h) in cases {
        assert_eq!(user(&h, &proxy()), Err(refused.clone()), "{case}");
    }
}

#[test]
fn a_malformed_escape_is_kept() {
    assert_eq!(unescape("a%2Fb"), "a/b");
    assert_eq!(unescape("a%zzb%2"), "a%zzb%2");
}
