//! The decisions over fabricated certificates and times. Certificates are real (rcgen), issued
//! at chosen moments; nothing here reads the clock.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::TimeDelta;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::certs::config::{Lifetimes, RenewBefore};
use crate::certs::issue::{issue_ca, issue_serving};
use crate::certs::observed::{Snapshot, StoredBundle, StoredServing, observe};
use crate::certs::{
    BUNDLE_KEY, CA_CERT_KEY, ROTATE_ANNOTATION, TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY, managed_labels,
};

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn hours(h: u64) -> Duration {
    Duration::from_secs(h * 3600)
}

fn settings() -> Settings {
    let l = Lifetimes::new(hours(168), hours(24), RenewBefore::Percent(20)).unwrap();
    Settings::new("kubevirt-operator-system", None, l).unwrap()
}

fn new_ca(s: &Settings, at: DateTime<Utc>) -> StoredCa {
    let pair = issue_ca(at, s.lifetimes.ca).unwrap();
    StoredCa {
        cert: Cert::from_pem(pair.cert_pem.as_bytes()).unwrap(),
        pair,
        rotate_requested: false,
    }
}

fn new_serving(s: &Settings, ca: &StoredCa, at: DateTime<Utc>) -> StoredServing {
    let pair = issue_serving(&ca.pair, &s.serving_names(), at, s.lifetimes.serving).unwrap();
    StoredServing {
        cert: Cert::from_pem(pair.cert_pem.as_bytes()).unwrap(),
        issuer_ca: Some(ca.cert.clone()),
        rotate_requested: false,
    }
}

/// Bundle ConfigMap and both webhook configurations as the operator writes them for `cas` at
/// `at` (which their stamps record).
fn publish(o: &mut Observed, s: &Settings, cas: &[Cert], at: DateTime<Utc>) {
    let pem = bundle::encode(cas);
    o.bundle = Stored::Ok(StoredBundle {
        cas: cas.to_vec(),
        malformed: 0,
    });
    let (installed_m, installed_v) = installed(s);
    let mut mutating = webhook_config::fill(&installed_m, s, pem.as_bytes()).unwrap();
    let mut validating = webhook_config::fill(&installed_v, s, pem.as_bytes()).unwrap();
    published::stamp(&mut mutating, &installed_m, s, at);
    published::stamp(&mut validating, &installed_v, s, at);
    o.mutating = Stored::Ok(mutating);
    o.validating = Stored::Ok(validating);
}

/// Both webhook configurations as the chart or manifests install them: no caBundle yet.
fn installed(
    s: &Settings,
) -> (
    k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
    k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
) {
    (
        webhook_config::mutating(s, b""),
        webhook_config::validating(s, b""),
    )
}

/// Everything in place: CA and serving certificate issued at `at`, bundle published.
fn steady(s: &Settings, at: DateTime<Utc>) -> (Observed, StoredCa) {
    let ca = new_ca(s, at);
    let serving = new_serving(s, &ca, at);
    let mut o = Observed {
        ca: Stored::Ok(ca.clone()),
        serving: Stored::Ok(serving),
        bundle: Stored::Missing,
        mutating: Stored::Missing,
        validating: Stored::Missing,
    };
    publish(&mut o, s, std::slice::from_ref(&ca.cert), at);
    (o, ca)
}

/// A fresh install: the webhook configurations are there (no caBundle), nothing else.
fn empty() -> Observed {
    let (mutating, validating) = installed(&settings());
    Observed {
        ca: Stored::Missing,
        serving: Stored::Missing,
        bundle: Stored::Missing,
        mutating: Stored::Ok(mutating),
        validating: Stored::Ok(validating),
    }
}

fn kinds(plan: &Plan) -> Vec<(Target, String)> {
    plan.actions
        .iter()
        .map(|a| (a.target(), a.reason().label().to_owned()))
        .collect()
}

fn one(plan: &Plan, target: Target, reason: &str) {
    assert_eq!(kinds(plan), [(target, reason.to_owned())], "{plan:#?}");
}

/// Does what the manager does with an action, in memory, at `now`.
fn apply(o: &mut Observed, s: &Settings, action: &Action, now: DateTime<Utc>) {
    match action {
        Action::IssueCa { .. } => o.ca = Stored::Ok(new_ca(s, now)),
        Action::WriteBundle { pem, .. } => {
            let (cas, malformed) = Cert::all_from_pem(pem.as_bytes());
            o.bundle = Stored::Ok(StoredBundle { cas, malformed });
        }
        Action::WriteMutating { desired, .. } => o.mutating = Stored::Ok((**desired).clone()),
        Action::WriteValidating { desired, .. } => o.validating = Stored::Ok((**desired).clone()),
        Action::IssueServing { .. } => {
            let ca = o.ca.ok().expect("IssueServing only with a CA");
            o.serving = Stored::Ok(new_serving(s, ca, now));
        }
    }
}

/// Decides and applies until nothing is left to do at `now`; returns every action taken.
fn settle(o: &mut Observed, s: &Settings, now: DateTime<Utc>) -> (Vec<(Target, String)>, Plan) {
    let mut done = Vec::new();
    for _ in 0..10 {
        let plan = decide(o, s, now);
        if plan.actions.is_empty() {
            return (done, plan);
        }
        done.extend(kinds(&plan));
        for a in &plan.actions {
            apply(o, s, a, now);
        }
    }
    panic!("did not settle: {done:?}");
}

#[test]
fn fresh_install_builds_everything_in_dependency_order() {
    let s = settings();
    let mut o = empty();
    let (done, plan) = settle(&mut o, &s, t0());
    assert_eq!(
        done,
        [
            (Target::Ca, "missing".to_owned()),
            (Target::Bundle, "missing".to_owned()),
            (Target::MutatingWebhook, "missing".to_owned()),
            (Target::ValidatingWebhook, "missing".to_owned()),
            // Nothing was serving, so nothing to protect: no publish grace.
            (Target::Serving, "missing".to_owned()),
        ]
    );
    assert!(plan.problems.is_empty() && plan.waiting.is_none());
    // Next look: when the serving certificate is due (80% of 24h).
    assert_eq!(
        plan.wake_at,
        Some(t0() + TimeDelta::minutes(24 * 60 * 8 / 10))
    );
    let serving = o.serving.ok().unwrap();
    let ca = o.ca.ok().unwrap();
    trust::verify(
        &serving.cert,
        std::slice::from_ref(&ca.cert),
        "kubevirt-operator-webhook.kubevirt-operator-system.svc",
        t0(),
    )
    .unwrap();
}

#[test]
fn steady_state_does_nothing_and_wakes_at_the_next_renewal() {
    let s = settings();
    let (o, _) = steady(&s, t0());
    let plan = decide(&o, &s, t0() + TimeDelta::hours(1));
    assert_eq!(
        plan,
        Plan {
            wake_at: Some(t0() + TimeDelta::minutes(1152)),
            ..Plan::default()
        }
    );
}

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

#[test]
fn ca_rotation_publishes_first_then_waits_then_switches_serving() {
    let s = settings();
    let (mut o, old) = steady(&s, t0());
    let due = old.cert.renew_at(s.lifetimes.renew_before);
    assert_eq!(due, t0() + TimeDelta::minutes(168 * 60 * 8 / 10));
    let mut now = due;
    // Keep the serving certificate fresh so only the CA rotates.
    o.serving = Stored::Ok(new_serving(&s, &old, now - TimeDelta::hours(1)));

    one(&decide(&o, &s, now), Target::Ca, "renewal_due");
    let plan = decide(&o, &s, now);
    apply(&mut o, &s, &plan.actions[0], now);
    let new = o.ca.ok().unwrap().clone();

    // Not yet in the bundle: the bundle comes next, holding old and new.
    let plan = decide(&o, &s, now);
    one(&plan, Target::Bundle, "outdated");
    let Action::WriteBundle { pem, .. } = &plan.actions[0] else {
        panic!()
    };
    assert_eq!(
        Cert::all_from_pem(pem.as_bytes()).0,
        vec![old.cert.clone(), new.cert.clone()]
    );
    apply(&mut o, &s, &plan.actions[0], now);

    // In the bundle but not in the webhook configurations: those next, serving still waits.
    let plan = decide(&o, &s, now);
    assert_eq!(
        kinds(&plan),
        [
            (Target::MutatingWebhook, "outdated".to_owned()),
            (Target::ValidatingWebhook, "outdated".to_owned())
        ]
    );
    apply(&mut o, &s, &plan.actions[0], now);
    // Only the mutating configuration has it: still no serving certificate from the new CA.
    let plan = decide(&o, &s, now);
    one(&plan, Target::ValidatingWebhook, "outdated");
    apply(&mut o, &s, &plan.actions[0], now);

    // Published everywhere: the current certificate still works, so wait out the grace.
    let plan = decide(&o, &s, now);
    assert!(plan.actions.is_empty(), "{plan:#?}");
    assert!(plan.waiting.as_deref().unwrap().contains("waits until"));
    let ready = new.cert.issued_at() + s.publish_grace;
    assert_eq!(plan.wake_at, Some(ready));
    now = ready - TimeDelta::seconds(1);
    assert!(decide(&o, &s, now).actions.is_empty());
    now = ready;
    one(&decide(&o, &s, now), Target::Serving, "ca_rotated");
    let plan = decide(&o, &s, now);
    apply(&mut o, &s, &plan.actions[0], now);
    let serving = o.serving.ok().unwrap();
    assert_eq!(serving.issuer_ca.as_ref(), Some(&new.cert));
    assert!(decide(&o, &s, now).actions.is_empty());

    // The old CA stays in the bundle until the moment it expires.
    let at = old.cert.not_after - TimeDelta::seconds(1);
    let mut o2 = o.clone();
    o2.serving = Stored::Ok(new_serving(&s, &new, at - TimeDelta::hours(1)));
    assert!(decide(&o2, &s, at).actions.is_empty());
    let plan = decide(&o2, &s, old.cert.not_after);
    one(&plan, Target::Bundle, "outdated");
    let Action::WriteBundle { pem, .. } = &plan.actions[0] else {
        panic!()
    };
    assert_eq!(Cert::all_from_pem(pem.as_bytes()).0, vec![new.cert.clone()]);
    // ... and that expiry is a scheduled wake-up.
    assert!(decide(&o2, &s, at).wake_at.unwrap() <= old.cert.not_after);
}

#[test]
fn serving_is_not_issued_from_an_unpublished_ca_even_when_missing() {
    let s = settings();
    let (mut o, old) = steady(&s, t0());
    let new = new_ca(&s, t0() + TimeDelta::hours(1));
    o.ca = Stored::Ok(new.clone());
    o.serving = Stored::Missing;
    // The bundle still holds only the old CA: it must be written before any issuance.
    one(
        &decide(&o, &s, t0() + TimeDelta::hours(1)),
        Target::Bundle,
        "outdated",
    );
    publish(
        &mut o,
        &s,
        &[old.cert.clone(), new.cert.clone()],
        t0() + TimeDelta::hours(1),
    );
    // Reinstalled without a caBundle (helm uninstall and install, say).
    o.mutating = Stored::Ok(installed(&s).0);
    let plan = decide(&o, &s, t0() + TimeDelta::hours(1));
    one(&plan, Target::MutatingWebhook, "missing");
    assert!(
        plan.waiting
            .unwrap()
            .contains("both webhook configurations")
    );
}

#[test]
fn a_missing_or_broken_serving_secret_is_recreated_at_once() {
    let s = settings();
    let (mut o, _) = steady(&s, t0());
    let now = t0() + TimeDelta::hours(2);
    o.serving = Stored::Missing;
    one(&decide(&o, &s, now), Target::Serving, "missing");
    o.serving = Stored::Unreadable("tls.crt: malformed".into());
    one(&decide(&o, &s, now), Target::Serving, "unreadable");
}

#[test]
fn rotation_requests_renew_now() {
    let s = settings();
    let (mut o, _) = steady(&s, t0());
    let now = t0() + TimeDelta::hours(1);
    if let Stored::Ok(sv) = &mut o.serving {
        sv.rotate_requested = true;
    }
    one(&decide(&o, &s, now), Target::Serving, "requested");
    if let Stored::Ok(ca) = &mut o.ca {
        ca.rotate_requested = true;
    }
    one(&decide(&o, &s, now), Target::Ca, "requested");
}

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

mod webhooks;
