//! Many rotations simulated second by second: the served certificate is always trusted, and
//! holding back never outlasts it.

use super::*;

/// Many rotations with short lifetimes, one second at a time, with kube-apiserver seeing the
/// webhook configuration up to `publish_grace - 1s` late: at every moment the served
/// certificate is valid and trusted by every caBundle an API server may still hold.
fn simulate(ca_secs: u64, serving_secs: u64, renew: RenewBefore, seconds: i64) -> (usize, usize) {
    let l = Lifetimes::new(
        Duration::from_secs(ca_secs),
        Duration::from_secs(serving_secs),
        renew,
    )
    .unwrap();
    let s = Settings::new(
        "kubevirt-operator-system",
        Some("https://127.0.0.1:8443"),
        l,
    )
    .unwrap();
    let lag = (s.publish_grace - TimeDelta::seconds(1))
        .num_seconds()
        .max(0) as usize;
    let mut o = empty();
    let (m, v) = installed(&s);
    (o.mutating, o.validating) = (Stored::Ok(m), Stored::Ok(v));
    let mut history: Vec<Vec<Cert>> = Vec::new(); // webhook caBundle per second
    let (mut ca_issued, mut serving_issued) = (0, 0);
    for sec in 0..seconds {
        let now = t0() + TimeDelta::seconds(sec);
        let (done, plan) = settle(&mut o, &s, now);
        assert!(plan.problems.is_empty());
        ca_issued += done.iter().filter(|d| d.0 == Target::Ca).count();
        serving_issued += done.iter().filter(|d| d.0 == Target::Serving).count();
        let Stored::Ok(m) = &o.mutating else { panic!() };
        let hook = &m.webhooks.as_ref().unwrap()[0];
        history.push(Cert::all_from_pem(&hook.client_config.ca_bundle.as_ref().unwrap().0).0);
        let serving = &o.serving.ok().unwrap().cert;
        let from = history.len().saturating_sub(lag + 1);
        for (i, bundle) in history[from..].iter().enumerate() {
            trust::verify(serving, bundle, "127.0.0.1", now).unwrap_or_else(|e| {
                panic!(
                    "{ca_secs}s/{serving_secs}s: at {sec}s the served certificate is not trusted by the caBundle of {}s ago: {e}",
                    history.len() - from - 1 - i
                )
            });
        }
    }
    (ca_issued, serving_issued)
}

#[test]
fn simulated_rotations_never_serve_an_untrusted_certificate() {
    // 30 minutes of CA 3m / serving 1m: a CA every 144s (80% of 3m), a serving certificate at
    // least every 48s.
    let (cas, servings) = simulate(180, 60, RenewBefore::Percent(20), 1800);
    assert!((12..=13).contains(&cas), "{cas} CAs");
    assert!(servings >= 37, "{servings} serving certificates");
    // Renewal windows (6s) shorter than the default grace, and serving renewals that fall on
    // the CA's: the grace shrinks to fit and the old certificate never expires while waiting.
    let (cas, _) = simulate(90, 30, RenewBefore::Percent(20), 900);
    assert!(cas >= 12, "{cas} CAs");
    // Equal lifetimes, a fixed renew-before.
    let (cas, servings) = simulate(60, 60, RenewBefore::Fixed(Duration::from_secs(20)), 600);
    assert!(
        cas >= 14 && servings >= cas,
        "{cas} CAs, {servings} serving certificates"
    );
}

#[test]
fn holding_back_never_outlasts_the_current_certificate() {
    let mut s = settings();
    s.publish_grace = TimeDelta::minutes(30); // longer than what the certificate has left
    let (mut o, old) = steady(&s, t0());
    let now = t0() + TimeDelta::hours(100);
    o.serving = Stored::Ok(new_serving(
        &s,
        &old,
        now - TimeDelta::hours(23) - TimeDelta::minutes(50),
    ));
    let expires = o.serving.ok().unwrap().cert.not_after;
    let new = new_ca(&s, now);
    o.ca = Stored::Ok(new.clone());
    publish(&mut o, &s, &[old.cert.clone(), new.cert.clone()], now);
    let plan = decide(&o, &s, now);
    assert!(plan.actions.is_empty());
    assert_eq!(plan.wake_at, Some(expires - SWAP_MARGIN));
    one(
        &decide(&o, &s, expires - SWAP_MARGIN),
        Target::Serving,
        "ca_rotated",
    );
}

#[test]
fn renewal_from_the_same_ca_needs_no_grace() {
    let s = settings();
    let (mut o, _) = steady(&s, t0());
    if let Stored::Ok(sv) = &mut o.serving {
        sv.rotate_requested = true;
    }
    // A second after the CA was created: a new certificate from it is trusted wherever the
    // current one is, so no wait.
    one(
        &decide(&o, &s, t0() + TimeDelta::seconds(1)),
        Target::Serving,
        "requested",
    );
}
