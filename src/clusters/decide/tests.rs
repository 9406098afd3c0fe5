//! The decisions over fabricated observations and times; nothing here reads the clock.

use k8s_openapi::jiff::SignedDuration;

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_790_000_000 + secs).expect("time")
}

const ALL: Apis = Apis {
    kubevirt: true,
    cdi: true,
    storage_profiles: true,
    multus: true,
    kubevirt_snapshots: true,
    kubevirt_installs: true,
};

fn reached(apis: Apis) -> Observation {
    Observation::Probed(Probe::Reached {
        version: "v1.20.2".into(),
        apis,
        identity: "uid-ks".into(),
    })
}

#[test]
fn each_observation_names_what_is_wrong() {
    let cases = [
        (
            Observation::SecretNotFound {
                namespace: "ops".into(),
                name: "dc1".into(),
            },
            Reason::SecretNotFound,
            "Secret ops/dc1 not found",
        ),
        (
            Observation::SecretForbidden {
                namespace: "ops".into(),
                error: "forbidden".into(),
            },
            Reason::SecretForbidden,
            "may not read Secrets in namespace ops",
        ),
        (
            Observation::Unusable(Unusable::KeyMissing("config".into())),
            Reason::KeyMissing,
            "no key \"kubeconfig\" (keys: config)",
        ),
        (
            Observation::Unusable(Unusable::Invalid("failed to parse kubeconfig YAML".into())),
            Reason::KubeconfigInvalid,
            "not valid: failed to parse kubeconfig YAML",
        ),
        (
            Observation::Probed(Probe::Unreachable("connection refused".into())),
            Reason::Unreachable,
            "unreachable: connection refused",
        ),
        (
            Observation::Probed(Probe::Unauthorized("Unauthorized (401)".into())),
            Reason::Unauthorized,
            "refused the kubeconfig's credentials",
        ),
        (
            reached(ALL),
            Reason::Ready,
            "Kubernetes v1.20.2; serves KubeVirt, CDI, Multus",
        ),
        (
            reached(Apis {
                multus: false,
                ..ALL
            }),
            Reason::Ready,
            "serves KubeVirt, CDI; not Multus",
        ),
        (
            reached(Apis::default()),
            Reason::Ready,
            "serves none of KubeVirt, CDI, Multus",
        ),
    ];
    for (observed, reason, message) in cases {
        let v = verdict(&observed);
        assert_eq!(v.reason, reason, "{observed:?}");
        assert!(
            v.message.contains(message),
            "{:?} lacks {message:?}",
            v.message
        );
        assert_eq!(v.apis.is_some(), reason == Reason::Ready, "{observed:?}");
    }
}

#[test]
fn status_is_written_only_when_it_changes_or_last_checked_is_stale() {
    let refresh = REFRESH_LAST_CHECKED;
    let ready = verdict(&reached(ALL));
    let down = verdict(&Observation::Probed(Probe::Unreachable("refused".into())));
    let first = status(None, &ready, 3, Some(1), t(0), refresh).expect("a first status");
    assert_eq!(first.phase.as_deref(), Some("Ready"));
    assert_eq!(first.reason.as_deref(), Some("Ready"));
    assert_eq!(
        (
            first.kubevirt_installed,
            first.cdi_installed,
            first.multus_installed
        ),
        (Some(true), Some(true), Some(true))
    );
    assert_eq!(first.machines, Some(3));
    assert_eq!(first.last_checked, Some(Time(t(0))));
    let c = &first.conditions[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("Ready", "True", "Ready")
    );
    assert_eq!(c.observed_generation, Some(1));

    // (stored, verdict, machines, generation, now, write?)
    let cases: Vec<(&str, &Verdict, u32, i64, i64, bool)> = vec![
        ("the same a second later", &ready, 3, 1, 1, false),
        ("the same just before the refresh", &ready, 3, 1, 299, false),
        ("the same at the refresh", &ready, 3, 1, 300, true),
        ("another Machine count", &ready, 4, 1, 1, true),
        ("another generation", &ready, 3, 2, 1, true),
        ("unreachable", &down, 3, 1, 1, true),
    ];
    for (why, v, machines, generation, now, write) in cases {
        let next = status(Some(&first), v, machines, Some(generation), t(now), refresh);
        assert_eq!(next.is_some(), write, "{why}");
        if let Some(next) = next {
            assert_eq!(next.last_checked, Some(Time(t(now))), "{why}");
        }
    }

    // Unreachable: NotReady, the Ready condition flips at that time, what was served is kept.
    let broken = status(Some(&first), &down, 3, Some(1), t(10), refresh).expect("a change");
    assert_eq!(broken.phase.as_deref(), Some("NotReady"));
    assert_eq!(broken.reason.as_deref(), Some("Unreachable"));
    assert_eq!(broken.kubevirt_installed, Some(true), "last known");
    let c = &broken.conditions[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "Unreachable")
    );
    assert_eq!(c.last_transition_time, Time(t(10)));
    // Still unreachable with another message: the transition time stays.
    let other = verdict(&Observation::Probed(Probe::Unreachable("timed out".into())));
    let again = status(Some(&broken), &other, 3, Some(1), t(20), refresh).expect("new message");
    assert_eq!(again.conditions[0].last_transition_time, Time(t(10)));
    assert!(
        again
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("timed out")
    );
    // Back, with CDI gone.
    let back = verdict(&reached(Apis { cdi: false, ..ALL }));
    let healed = status(Some(&again), &back, 3, Some(1), t(30), refresh).expect("healed");
    assert_eq!(healed.cdi_installed, Some(false));
    assert_eq!(healed.conditions[0].last_transition_time, Time(t(30)));
}

#[test]
fn long_messages_are_cut_on_a_character_boundary() {
    let long = Verdict {
        reason: Reason::Unreachable,
        message: "é".repeat(MAX_MESSAGE),
        apis: None,
        identity: None,
    };
    let s = status(None, &long, 0, None, t(0), REFRESH_LAST_CHECKED).expect("status");
    let m = s.message.expect("message");
    assert!(m.len() <= MAX_MESSAGE && m.len() >= MAX_MESSAGE - 1);
    assert_eq!(s.conditions[0].message, m);
}

#[test]
fn a_last_checked_in_the_future_is_refreshed() {
    let ready = verdict(&reached(ALL));
    let mut stored = status(None, &ready, 0, None, t(0), REFRESH_LAST_CHECKED).expect("first");
    stored.last_checked = Some(Time(t(0) + SignedDuration::from_hours(1)));
    assert!(status(Some(&stored), &ready, 0, None, t(1), REFRESH_LAST_CHECKED).is_some());
}

#[test]
fn probe_errors_are_credentials_or_reachability() {
    let api = |code: u16| {
        kube::Error::Api(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": code, "message": "m", "reason": "r"}))
            .expect("status"),
        )
    };
    let io = kube::Error::Service(Box::new(std::io::Error::other("connection refused")));
    let cases = [
        (api(401), "Unauthorized"),
        (api(403), "Unauthorized"),
        (api(404), "Unreachable"),
        (api(500), "Unreachable"),
        (api(503), "Unreachable"),
        (io, "Unreachable"),
    ];
    for (error, want) in cases {
        let got = match classify(&error) {
            Probe::Unauthorized(_) => "Unauthorized",
            Probe::Unreachable(m) => {
                assert!(!m.is_empty());
                "Unreachable"
            }
            Probe::Reached { .. } => "Reached",
        };
        assert_eq!(got, want, "{error}");
    }
}

#[test]
fn the_identity_is_recorded_once_and_kept_while_another_is_found() {
    let refresh = REFRESH_LAST_CHECKED;
    let ready = identity::checked(verdict(&reached(ALL)), "dc1", "uid-a", None, None);
    let first = status(None, &ready, 1, None, t(0), refresh).expect("first");
    assert_eq!(first.cluster_identity.as_deref(), Some("uid-a"));
    let moved = identity::checked(verdict(&reached(ALL)), "dc1", "uid-b", Some("uid-a"), None);
    let changed = status(Some(&first), &moved, 1, None, t(1), refresh).expect("a change");
    assert_eq!(changed.reason.as_deref(), Some("ClusterChanged"));
    assert_eq!(changed.phase.as_deref(), Some("NotReady"));
    assert_eq!(changed.cluster_identity.as_deref(), Some("uid-a"), "kept");
    let acked = identity::checked(
        verdict(&reached(ALL)),
        "dc1",
        "uid-b",
        Some("uid-a"),
        Some("uid-b"),
    );
    let moved = status(Some(&changed), &acked, 1, None, t(2), refresh).expect("acknowledged");
    assert_eq!(moved.cluster_identity.as_deref(), Some("uid-b"));
    assert_eq!(moved.reason.as_deref(), Some("Ready"));
}
