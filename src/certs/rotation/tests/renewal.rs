//! When each certificate is renewed: at 80% of its life or a fixed time before its end, at once
//! when expired, and a CA expiring before its leaf first.

use super::*;

#[test]
fn serving_renews_at_80_percent_not_79() {
    let s = settings();
    let (o, _) = steady(&s, t0());
    let at = |pct: i64| t0() + TimeDelta::minutes(24 * 60 * pct / 100);
    assert!(decide(&o, &s, at(79)).actions.is_empty());
    assert!(
        decide(&o, &s, at(80) - TimeDelta::seconds(1))
            .actions
            .is_empty()
    );
    one(&decide(&o, &s, at(80)), Target::Serving, "renewal_due");
    one(&decide(&o, &s, at(81)), Target::Serving, "renewal_due");
}

#[test]
fn ca_renews_at_80_percent_not_79() {
    let s = settings();
    let (mut o, ca) = steady(&s, t0());
    let at = |pct: i64| t0() + TimeDelta::minutes(168 * 60 * pct / 100);
    // Keep a fresh serving certificate so only the CA can be due.
    o.serving = Stored::Ok(new_serving(&s, &ca, at(79) - TimeDelta::hours(1)));
    assert!(decide(&o, &s, at(79)).actions.is_empty());
    one(&decide(&o, &s, at(81)), Target::Ca, "renewal_due");
}

#[test]
fn fixed_renew_before() {
    let mut s = settings();
    s.lifetimes = Lifetimes::new(hours(168), hours(24), RenewBefore::Fixed(hours(2))).unwrap();
    let (o, _) = steady(&s, t0());
    assert!(
        decide(&o, &s, t0() + TimeDelta::hours(22) - TimeDelta::seconds(1))
            .actions
            .is_empty()
    );
    one(
        &decide(&o, &s, t0() + TimeDelta::hours(22)),
        Target::Serving,
        "renewal_due",
    );
}

#[test]
fn expired_certificates_are_replaced() {
    let s = settings();
    let (o, _) = steady(&s, t0());
    one(
        &decide(&o, &s, t0() + TimeDelta::hours(25)),
        Target::Serving,
        "expired",
    );
    one(
        &decide(&o, &s, t0() + TimeDelta::hours(169)),
        Target::Ca,
        "expired",
    );
}

/// A leaf signed by `ca` with any validity, bypassing the cap `issue_serving` applies.
fn leaf_with_validity(s: &Settings, ca: &StoredCa, nb: DateTime<Utc>, na: DateTime<Utc>) -> Cert {
    let key = rcgen::KeyPair::from_pem(&ca.pair.key_pem).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.pair.cert_pem, key).unwrap();
    let mut params = rcgen::CertificateParams::new(s.serving_names().dns).unwrap();
    params.not_before = time::OffsetDateTime::from_unix_timestamp(nb.timestamp()).unwrap();
    params.not_after = time::OffsetDateTime::from_unix_timestamp(na.timestamp()).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params
        .signed_by(&rcgen::KeyPair::generate().unwrap(), &issuer)
        .unwrap();
    Cert::from_pem(cert.pem().as_bytes()).unwrap()
}

#[test]
fn a_ca_expiring_before_its_leaf_is_renewed_first() {
    let s = settings();
    let ca = new_ca(&s, t0());
    // A leaf (from an older version, say) that outlives its CA by a day.
    let leaf = leaf_with_validity(&s, &ca, t0(), ca.cert.not_after + TimeDelta::hours(24));
    let mut o = Observed {
        ca: Stored::Ok(ca.clone()),
        serving: Stored::Ok(StoredServing {
            cert: leaf.clone(),
            issuer_ca: Some(ca.cert.clone()),
            rotate_requested: false,
        }),
        ..empty()
    };
    publish(&mut o, &s, std::slice::from_ref(&ca.cert), t0());
    // The leaf's own 80% point is past the CA's; the CA's renewal is what wakes us.
    let plan = decide(&o, &s, t0() + TimeDelta::hours(1));
    assert!(plan.actions.is_empty());
    let ca_due = ca.cert.renew_at(s.lifetimes.renew_before);
    assert!(leaf.renew_at(s.lifetimes.renew_before) > ca_due);
    assert_eq!(plan.wake_at, Some(ca_due));
    // Then the CA goes first; the leaf follows once the new CA is published.
    one(&decide(&o, &s, ca_due), Target::Ca, "renewal_due");
    let (done, plan) = settle(&mut o, &s, ca_due);
    assert!(!done.contains(&(Target::Serving, "ca_rotated".to_owned())));
    assert_eq!(plan.wake_at, Some(ca_due + s.publish_grace));
    let (done, _) = settle(&mut o, &s, ca_due + s.publish_grace);
    assert_eq!(done, [(Target::Serving, "ca_rotated".to_owned())]);
    let now_serving = &o.serving.ok().unwrap().cert;
    assert!(now_serving.not_after <= o.ca.ok().unwrap().cert.not_after);
}
