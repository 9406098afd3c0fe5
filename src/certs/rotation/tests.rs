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
        api_service: Stored::Missing,
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
        api_service: Stored::Missing,
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
        Action::WriteApiService { desired, .. } => o.api_service = Stored::Ok((**desired).clone()),
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

mod api_service;
mod renewal;
mod simulation;
mod stored;
mod webhooks;
