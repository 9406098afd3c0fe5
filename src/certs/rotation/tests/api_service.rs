//! The aggregated API's APIService in the decisions: filled like the webhook configurations
//! while it is served (and only if it names our Service), waited for before a serving
//! certificate from a new CA, never created, never read when the aggregated API is off.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use super::*;
use crate::certs::api_service::{self, NAME};

fn served() -> Settings {
    settings().with_api_service(true)
}

fn installed_api_service(namespace: &str) -> APIService {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": NAME, "resourceVersion": "1" },
        "spec": {
            "group": "subresources.vitistack.io",
            "version": "v1alpha1",
            "service": { "namespace": namespace, "name": "kubevirt-operator-webhook", "port": 8444 },
            "groupPriorityMinimum": 1000,
            "versionPriority": 15,
        }
    }))
    .unwrap()
}

fn bundle_of(o: &Observed) -> Option<Vec<Cert>> {
    let a = o.api_service.ok()?;
    let b = a.spec.as_ref()?.ca_bundle.as_ref()?;
    Some(Cert::all_from_pem(&b.0).0)
}

#[test]
fn a_fresh_install_fills_the_api_service_before_serving() {
    let s = served();
    let mut o = empty();
    o.api_service = Stored::Ok(installed_api_service(&s.namespace));
    let (done, plan) = settle(&mut o, &s, t0());
    assert_eq!(
        done,
        [
            (Target::Ca, "missing".to_owned()),
            (Target::Bundle, "missing".to_owned()),
            (Target::MutatingWebhook, "missing".to_owned()),
            (Target::ValidatingWebhook, "missing".to_owned()),
            (Target::ApiService, "missing".to_owned()),
            (Target::Serving, "missing".to_owned()),
        ]
    );
    assert!(plan.problems.is_empty(), "{plan:#?}");
    let ca = o.ca.ok().unwrap().cert.clone();
    assert_eq!(bundle_of(&o), Some(vec![ca]));
    let live = o.api_service.ok().unwrap();
    assert!(crate::certs::observed::ca_bundle_written_at(&live.metadata) == Some(t0()));
    // Settled: nothing more to write.
    assert!(decide(&o, &s, t0()).actions.is_empty());
}

#[test]
fn off_missing_or_pointing_elsewhere_it_is_never_written() {
    // (settings, stored APIService, the problem reported)
    let elsewhere = installed_api_service("another-namespace");
    let cases = [
        (
            "off, installed",
            settings(),
            Stored::Ok(installed_api_service("kubevirt-operator-system")),
            None,
        ),
        ("off, missing", settings(), Stored::Missing, None),
        (
            "served, missing",
            served(),
            Stored::Missing,
            Some(Problem::NotInstalled {
                target: Target::ApiService,
                name: NAME.to_owned(),
            }),
        ),
        (
            "served, another Service",
            served(),
            Stored::Ok(elsewhere),
            Some(Problem::NotCallingUs {
                target: Target::ApiService,
                name: NAME.to_owned(),
                callee: "Service kubevirt-operator-system/kubevirt-operator-webhook".to_owned(),
            }),
        ),
    ];
    for (case, s, stored, problem) in cases {
        let mut o = empty();
        o.api_service = stored.clone();
        let (done, plan) = settle(&mut o, &s, t0());
        assert!(
            done.iter().all(|(t, _)| *t != Target::ApiService),
            "{case}: {done:?}"
        );
        assert_eq!(o.api_service, stored, "{case}");
        assert_eq!(
            plan.problems,
            problem.into_iter().collect::<Vec<_>>(),
            "{case}"
        );
        // The serving certificate was issued all the same: nothing to wait for there.
        assert!(o.serving.ok().is_some(), "{case}");
    }
    let shown = Problem::NotInstalled {
        target: Target::ApiService,
        name: NAME.to_owned(),
    }
    .to_string();
    assert!(
        shown.contains("does not route subresources.vitistack.io"),
        "{shown}"
    );
}

/// A new CA reaches the APIService before any serving certificate from it is used, and the
/// publish grace counts from its stamp too.
#[test]
fn a_new_ca_waits_for_the_api_service_too() {
    let s = served();
    let (mut o, old) = steady(&s, t0());
    let mut a = api_service::fill(
        &installed_api_service(&s.namespace),
        &s,
        bundle::encode(std::slice::from_ref(&old.cert)).as_bytes(),
    )
    .unwrap();
    published::stamp(&mut a, &APIService::default(), &s, t0());
    o.api_service = Stored::Ok(a);
    assert!(
        decide(&o, &s, t0() + TimeDelta::hours(1))
            .actions
            .is_empty()
    );

    // Ask for a new CA: bundle, both configurations and the APIService get it first.
    let later = t0() + TimeDelta::hours(2);
    if let Stored::Ok(ca) = &mut o.ca {
        ca.rotate_requested = true;
    }
    let (done, plan) = settle(&mut o, &s, later);
    assert_eq!(
        done,
        [
            (Target::Ca, "requested".to_owned()),
            (Target::Bundle, "outdated".to_owned()),
            (Target::MutatingWebhook, "outdated".to_owned()),
            (Target::ValidatingWebhook, "outdated".to_owned()),
            (Target::ApiService, "outdated".to_owned()),
        ]
    );
    let new = o.ca.ok().unwrap().cert.clone();
    let trusted = bundle_of(&o).unwrap();
    assert!(trusted.contains(&new) && trusted.contains(&old.cert));
    assert!(plan.waiting.is_some(), "{plan:#?}");

    // An APIService that lost the new CA (edited by hand) holds the switch back ...
    let mut lost = o.clone();
    let stale = api_service::fill(
        lost.api_service.ok().unwrap(),
        &s,
        bundle::encode(std::slice::from_ref(&old.cert)).as_bytes(),
    )
    .unwrap();
    lost.api_service = Stored::Ok(stale);
    let after_grace = later + s.publish_grace + TimeDelta::seconds(1);
    let plan = decide(&lost, &s, after_grace);
    assert_eq!(kinds(&plan), [(Target::ApiService, "outdated".to_owned())]);
    // ... while the one that has it lets it go after the grace.
    let (done, _) = settle(&mut o, &s, after_grace);
    assert_eq!(done, [(Target::Serving, "ca_rotated".to_owned())]);
}
