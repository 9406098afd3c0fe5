use super::*;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let pem = params.self_signed(&key).expect("CA").pem();
    Ca {
        pem,
        issuer: Issuer::new(params, key),
    }
}

fn client(ca: &Ca, cn: &str) -> CertificateDer<'static> {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params
        .signed_by(&key, &ca.issuer)
        .expect("client")
        .der()
        .clone()
}

fn proxy(ca: &Ca, allowed: &[&str]) -> FrontProxy {
    FrontProxy {
        client_ca_pem: ca.pem.clone(),
        allowed_names: allowed.iter().map(|s| (*s).to_owned()).collect(),
        username_headers: vec!["X-Remote-User".to_owned()],
        group_headers: vec![],
        extra_headers_prefixes: vec![],
    }
}

#[test]
fn only_the_front_proxys_certificate_passes() {
    crate::tls::install_crypto_provider();
    let (front, users) = (ca("front-proxy-ca"), ca("client-ca"));
    let verifier = FrontProxyVerifier::new();
    let now = UnixTime::now();
    let check = |cert: &CertificateDer<'_>| verifier.verify_client_cert(cert, &[], now).is_ok();
    let proxy_cert = client(&front, "front-proxy-client");

    assert!(
        !check(&proxy_cert),
        "nothing is trusted before the ConfigMap is read"
    );
    verifier
        .trust(proxy(&front, &["front-proxy-client"]))
        .expect("trust");
    let cases = [
        ("the front proxy", proxy_cert.clone(), true),
        (
            "another name of the front-proxy CA",
            client(&front, "alice"),
            false,
        ),
        (
            "the allowed name from another CA",
            client(&users, "front-proxy-client"),
            false,
        ),
    ];
    for (case, cert, want) in cases {
        assert_eq!(check(&cert), want, "{case}");
    }
    verifier.trust(proxy(&front, &[])).expect("trust");
    assert!(
        check(&client(&front, "alice")),
        "no names listed: any of the CA"
    );
    verifier.forget();
    assert!(!check(&proxy_cert), "forgotten");
    assert!(
        verifier
            .trust(FrontProxy {
                client_ca_pem: "junk".into(),
                ..proxy(&front, &[])
            })
            .is_err()
    );
}
