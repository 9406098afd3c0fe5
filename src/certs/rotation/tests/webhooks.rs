//! The webhook configurations in the decisions: only filled, never created; and the publish
//! grace counted from when they were written.

use super::*;

/// The operator creates no webhook configuration: one that is not installed, or none of whose
/// webhooks calls this operator, is reported (and counted in the problems metric), never
/// written; a serving certificate has nothing to wait for there.
#[test]
fn webhook_configurations_are_only_filled_never_created() {
    let s = settings();
    let mut o = empty();
    o.mutating = Stored::Missing;
    o.validating = Stored::Missing;
    let (done, plan) = settle(&mut o, &s, t0());
    assert_eq!(
        done,
        [
            (Target::Ca, "missing".to_owned()),
            (Target::Bundle, "missing".to_owned()),
            (Target::Serving, "missing".to_owned()),
        ]
    );
    let name = "kubevirt-operator".to_owned();
    assert_eq!(
        plan.problems,
        [
            Problem::NotInstalled {
                target: Target::MutatingWebhook,
                name: name.clone()
            },
            Problem::NotInstalled {
                target: Target::ValidatingWebhook,
                name: name.clone()
            },
        ]
    );
    assert!(plan.problems[0].to_string().contains(
        "MutatingWebhookConfiguration kubevirt-operator does not exist, so admission of Machines is not configured"
    ));
    assert_eq!(plan.problems[0].target(), Target::MutatingWebhook);

    // Installed for another release's Service: reported, left alone.
    let other = s.clone().with_service("other-webhook").unwrap();
    let (m, v) = installed(&other);
    o.mutating = Stored::Ok(m);
    o.validating = Stored::Ok(v);
    let plan = decide(&o, &s, t0());
    assert!(plan.actions.is_empty(), "{plan:#?}");
    assert!(plan.problems[1].to_string().contains(
        "ValidatingWebhookConfiguration kubevirt-operator has no webhook calling Service kubevirt-operator-system/kubevirt-operator-webhook"
    ));
}

#[test]
fn an_edited_or_reinstalled_ca_bundle_is_filled_again() {
    let s = settings();
    let (mut o, _) = steady(&s, t0());
    let now = t0() + TimeDelta::hours(1);
    if let Stored::Ok(m) = &mut o.mutating {
        m.webhooks.as_mut().unwrap()[0].client_config.ca_bundle = Some(ByteString(b"x".to_vec()));
    }
    o.validating = Stored::Ok(installed(&s).1);
    let plan = decide(&o, &s, now);
    assert_eq!(
        kinds(&plan),
        [
            (Target::MutatingWebhook, "outdated".to_owned()),
            (Target::ValidatingWebhook, "missing".to_owned())
        ]
    );
}

#[test]
fn a_changed_webhook_url_reissues_with_the_new_names() {
    let s = settings();
    let (o, _) = steady(&s, t0());
    let mut moved = s.clone();
    moved.webhook_url =
        Some(crate::certs::config::WebhookUrl::parse("https://127.0.0.1:9443").unwrap());
    let plan = decide(&o, &moved, t0() + TimeDelta::hours(1));
    // The certificate for the new host; the installed configurations still call the Service,
    // which is theirs to change (reinstalled for the URL), not the operator's.
    assert_eq!(
        kinds(&plan),
        [(Target::Serving, "names_changed".to_owned())]
    );
    assert!(
        plan.problems
            .iter()
            .all(|p| matches!(p, Problem::NotCallingUs { .. })),
        "{plan:#?}"
    );
}

/// The grace counts from when both webhook configurations were written, as recorded on them,
/// not from the CA's issue time: a CA issued long ago (say, by a leader that died before it
/// published it) still waits the full grace after it reaches the webhooks, and a new leader
/// reading the stamps waits out what is left.
#[test]
fn the_grace_counts_from_the_recorded_webhook_writes() {
    let s = settings();
    let (mut o, old) = steady(&s, t0());
    let issued = t0() + TimeDelta::hours(100);
    // A serving certificate from the old CA that works throughout.
    o.serving = Stored::Ok(new_serving(&s, &old, issued - TimeDelta::hours(1)));
    let new = new_ca(&s, issued);
    o.ca = Stored::Ok(new.clone());
    let both = [old.cert.clone(), new.cert.clone()];
    let cases = [
        // (webhooks written, now, serving issued?)
        (
            issued + TimeDelta::hours(1),
            issued + TimeDelta::hours(1),
            false,
        ),
        (
            issued + TimeDelta::hours(1),
            issued + TimeDelta::hours(1) + s.publish_grace - TimeDelta::seconds(1),
            false,
        ),
        (
            issued + TimeDelta::hours(1),
            issued + TimeDelta::hours(1) + s.publish_grace,
            true,
        ),
        (issued, issued + s.publish_grace, true),
    ];
    for (written, now, issues) in cases {
        let mut o = o.clone();
        publish(&mut o, &s, &both, written);
        let plan = decide(&o, &s, now);
        if issues {
            one(&plan, Target::Serving, "ca_rotated");
        } else {
            assert!(plan.actions.is_empty(), "{plan:#?}");
            assert_eq!(plan.wake_at, Some(written + s.publish_grace), "{plan:#?}");
        }
    }
    // Mutating written first, validating later: the later write counts.
    publish(&mut o, &s, &both, issued);
    let later = issued + TimeDelta::minutes(5);
    let mut validating = o.validating.ok().unwrap().clone();
    validating.metadata.annotations = None;
    let unstamped = validating.clone();
    published::stamp(&mut validating, &unstamped, &s, later);
    o.validating = Stored::Ok(validating);
    assert_eq!(
        decide(&o, &s, issued + s.publish_grace).wake_at,
        Some(later + s.publish_grace)
    );
}

/// Configurations that trust the new CA but carry no stamp (written by an older version, or
/// edited): they are stamped now, and the serving certificate waits the grace from then.
#[test]
fn unrecorded_webhook_writes_are_stamped_before_the_wait_begins() {
    let s = settings();
    let (mut o, old) = steady(&s, t0());
    let now = t0() + TimeDelta::hours(100);
    o.serving = Stored::Ok(new_serving(&s, &old, now - TimeDelta::hours(1)));
    let new = new_ca(&s, t0() + TimeDelta::hours(50));
    o.ca = Stored::Ok(new.clone());
    publish(&mut o, &s, &[old.cert.clone(), new.cert.clone()], now);
    for o_meta in [
        o.mutating.ok().map(|c| c.metadata.clone()),
        o.validating.ok().map(|c| c.metadata.clone()),
    ] {
        assert!(!published::unstamped(&o_meta.unwrap()));
    }
    if let Stored::Ok(m) = &mut o.mutating {
        m.metadata.annotations = None;
    }
    if let Stored::Ok(v) = &mut o.validating {
        v.metadata.annotations = None;
    }
    let plan = decide(&o, &s, now);
    assert_eq!(
        kinds(&plan),
        [
            (Target::MutatingWebhook, "unrecorded".to_owned()),
            (Target::ValidatingWebhook, "unrecorded".to_owned())
        ]
    );
    assert!(
        plan.waiting.as_deref().unwrap().contains("record"),
        "{plan:#?}"
    );
    let (done, plan) = settle(&mut o, &s, now);
    assert_eq!(done.len(), 2, "{done:?}");
    assert_eq!(plan.wake_at, Some(now + s.publish_grace));
    one(
        &decide(&o, &s, now + s.publish_grace),
        Target::Serving,
        "ca_rotated",
    );
}
