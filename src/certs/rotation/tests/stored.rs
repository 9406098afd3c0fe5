//! Stored objects: ours classified (a corrupted bundle rebuilt with every CA still needed),
//! foreign ones reported and never written.

use super::*;

#[test]
fn foreign_objects_are_reported_never_written() {
    let s = settings();
    let (o, _) = steady(&s, t0());
    let now = t0() + TimeDelta::hours(30); // serving expired: it would be replaced if ours
    let mut f = o.clone();
    f.serving = Stored::Foreign;
    let plan = decide(&f, &s, now);
    assert!(plan.actions.is_empty());
    assert_eq!(plan.problems, [Problem::Foreign(Target::Serving)]);
    assert!(plan.problems[0].to_string().contains(
        "Secret kubevirt-operator-webhook-tls exists but is not managed by kubevirt-operator"
    ));

    let mut f = o.clone();
    f.ca = Stored::Foreign;
    let plan = decide(&f, &s, t0() + TimeDelta::hours(200));
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::IssueCa { .. } | Action::IssueServing { .. }))
    );
    assert!(plan.problems.contains(&Problem::Foreign(Target::Ca)));

    let mut f = o.clone();
    f.bundle = Stored::Foreign;
    let plan = decide(&f, &s, t0() + TimeDelta::hours(2));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.problems, [Problem::Foreign(Target::Bundle)]);
}

fn secret(data: &[(&str, &str)], annotations: &[(&str, &str)], labelled: bool) -> Secret {
    Secret {
        metadata: ObjectMeta {
            labels: labelled.then(managed_labels),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// The operator's bundle ConfigMap holding `pem`.
fn bundle(pem: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            labels: Some(managed_labels()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(BUNDLE_KEY.to_owned(), pem)])),
        ..ConfigMap::default()
    }
}

#[test]
fn stored_objects_are_classified() {
    crate::tls::install_crypto_provider();
    let s = settings();
    let ca = new_ca(&s, t0());
    let other = new_ca(&s, t0());
    let sv = issue_serving(&ca.pair, &s.serving_names(), t0(), s.lifetimes.serving).unwrap();
    let snapshot = Snapshot {
        ca: Some(secret(
            &[
                (TLS_CERT_KEY, &ca.pair.cert_pem),
                (TLS_PRIVATE_KEY_KEY, &ca.pair.key_pem),
            ],
            &[(ROTATE_ANNOTATION, "2026-01-01T00:00:00Z")],
            true,
        )),
        serving: Some(secret(
            &[
                (TLS_CERT_KEY, &sv.cert_pem),
                (TLS_PRIVATE_KEY_KEY, &sv.key_pem),
                (CA_CERT_KEY, &ca.pair.cert_pem),
            ],
            &[],
            true,
        )),
        bundle: Some(bundle(format!(
            "{}-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n",
            ca.pair.cert_pem
        ))),
        mutating: None,
        validating: None,
        api_service: None,
    };
    let o = observe(&snapshot);
    let c = o.ca.ok().unwrap();
    assert!(c.rotate_requested);
    assert_eq!(c.cert, ca.cert);
    let srv = o.serving.ok().unwrap();
    assert_eq!(srv.issuer_ca.as_ref(), Some(&ca.cert));
    assert!(!srv.rotate_requested);
    assert_eq!(o.bundle.ok().unwrap().malformed, 1);
    assert_eq!(o.mutating, Stored::Missing);

    // Corrupted PEM, a key from another certificate, a leaf where a CA belongs, no label.
    let broken = |data: &[(&str, &str)]| {
        observe(&Snapshot {
            ca: Some(secret(data, &[], true)),
            ..Snapshot::default()
        })
        .ca
    };
    assert!(matches!(
        broken(&[
            (
                TLS_CERT_KEY,
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
            ),
            (TLS_PRIVATE_KEY_KEY, &ca.pair.key_pem)
        ]),
        Stored::Unreadable(_)
    ));
    assert!(
        matches!(broken(&[(TLS_CERT_KEY, &ca.pair.cert_pem), (TLS_PRIVATE_KEY_KEY, &other.pair.key_pem)]), Stored::Unreadable(w) if w.contains("does not belong"))
    );
    assert!(
        matches!(broken(&[(TLS_CERT_KEY, &sv.cert_pem), (TLS_PRIVATE_KEY_KEY, &sv.key_pem)]), Stored::Unreadable(w) if w.contains("not a CA"))
    );
    assert!(
        matches!(broken(&[(TLS_CERT_KEY, &ca.pair.cert_pem)]), Stored::Unreadable(w) if w == "no tls.key")
    );
    let foreign = observe(&Snapshot {
        serving: Some(secret(&[], &[], false)),
        ..Snapshot::default()
    });
    assert_eq!(foreign.serving, Stored::Foreign);
    let garbage_bundle = observe(&Snapshot {
        bundle: Some(bundle("garbage".to_owned())),
        ..Snapshot::default()
    });
    assert!(matches!(garbage_bundle.bundle, Stored::Unreadable(_)));
}

#[test]
fn a_corrupted_bundle_is_rebuilt_with_every_ca_still_needed() {
    let s = settings();
    let (mut o, old) = steady(&s, t0());
    // Mid-rotation: new CA in the Secret, serving still from the old one, bundle destroyed.
    let new = new_ca(&s, t0() + TimeDelta::hours(1));
    o.ca = Stored::Ok(new.clone());
    o.bundle = Stored::Unreadable("no readable certificate".into());
    let plan = decide(&o, &s, t0() + TimeDelta::hours(1));
    one(&plan, Target::Bundle, "unreadable");
    let Action::WriteBundle { pem, .. } = &plan.actions[0] else {
        panic!()
    };
    // The serving certificate's CA (recorded in ca.crt) stays trusted.
    assert_eq!(
        Cert::all_from_pem(pem.as_bytes()).0,
        vec![old.cert, new.cert]
    );
}
