use super::*;

const T: &str = "2026-11-25T10:00:00Z";

fn vmi(created: &str) -> Vmi<'static> {
    Vmi {
        name: "m",
        uid: "u1",
        created: created.parse().ok(),
    }
}

fn inputs<'a>(
    requested: Option<&'a str>,
    last: Option<&'a str>,
    v: Option<&'a Vmi<'a>>,
) -> Inputs<'a> {
    Inputs {
        requested,
        last,
        pending: None,
        last_generation: None,
        vmi: v,
        strategy: "Always",
        evacuate: None,
    }
}

#[test]
fn a_drain_restarts_the_vmi_marked_for_it_once_and_never_a_halted_one() {
    let running = vmi("2026-11-25T09:00:00Z");
    let off = |cause| Some(("m".to_owned(), "u1".to_owned(), cause));
    // (row, node to leave, vmi, run strategy, requested, deleted for)
    let rows = [
        (
            "drained",
            Some("n1"),
            Some(&running),
            "Always",
            None,
            off(Cause::Evacuation("n1".into())),
        ),
        ("no drain", None, Some(&running), "Always", None, None),
        ("halted", Some("n1"), Some(&running), "Halted", None, None),
        ("gone already", Some("n1"), None, "Always", None, None),
        // A request at the same time: one restart serves both.
        (
            "and requested",
            Some("n1"),
            Some(&running),
            "Always",
            Some(T),
            off(Cause::Requested(T.into())),
        ),
    ];
    for (row, evacuate, v, strategy, requested, want) in rows {
        let got = decide(&Inputs {
            evacuate,
            strategy,
            ..inputs(requested, None, v)
        });
        assert_eq!(got.delete_vmi, want, "{row}");
    }
}

#[test]
fn a_new_value_deletes_an_older_vmi_once_and_is_recorded() {
    let old = vmi("2026-11-25T09:00:00Z");
    let fresh = vmi("2026-11-25T10:00:05Z");
    let deleted = Some((
        "m".to_owned(),
        "u1".to_owned(),
        Cause::Requested(T.to_owned()),
    ));
    let cases = [
        // (requested, last, vmi, strategy) -> (delete?, recorded)
        (
            Some(T),
            None,
            Some(&old),
            "Always",
            deleted.clone(),
            Some(T),
        ),
        (
            Some(T),
            Some("2026-11-01T00:00:00Z"),
            Some(&old),
            "Manual",
            deleted,
            Some(T),
        ),
        // Acted on already: nothing, whatever the VMI.
        (Some(T), Some(T), Some(&old), "Always", None, Some(T)),
        // The VMI KubeVirt started after the deletion (the status write had failed).
        (Some(T), None, Some(&fresh), "Always", None, Some(T)),
        // Nothing running, or halted: recorded, never repeated.
        (Some(T), None, None, "Always", None, Some(T)),
        (Some(T), None, Some(&old), "Halted", None, Some(T)),
        // Not a time (stored past admission): ignored.
        (Some("soon"), Some(T), Some(&old), "Always", None, Some(T)),
        (None, Some(T), Some(&old), "Always", None, Some(T)),
        (None, None, Some(&old), "Always", None, None),
    ];
    for (requested, last, v, strategy, delete, recorded) in cases {
        let got = decide(&Inputs {
            strategy,
            ..inputs(requested, last, v)
        });
        assert_eq!(
            got,
            Restart {
                delete_vmi: delete,
                last_restart: recorded.map(str::to_owned),
                last_restart_generation: None,
            },
            "{requested:?} {last:?} {strategy}"
        );
    }
}

#[test]
fn a_pending_change_restarts_once_per_generation() {
    let old = vmi("2026-11-25T09:00:00Z");
    let fresh = vmi("2026-11-25T10:00:05Z");
    let since = T.parse().ok();
    let pending = |generation| Some(Pending { generation, since });
    let gone = |g| Some(("m".to_owned(), "u1".to_owned(), Cause::PendingChange(g)));
    let cases = [
        // (pending, last generation, vmi, strategy) -> (delete?, recorded generation)
        (pending(3), None, Some(&old), "Always", gone(3), Some(3)),
        (
            pending(4),
            Some(3),
            Some(&old),
            "RerunOnFailure",
            gone(4),
            Some(4),
        ),
        // Restarted for this generation already: never again, even if the condition stays.
        (pending(3), Some(3), Some(&old), "Always", None, Some(3)),
        // The VMI started after the condition appeared: KubeVirt clears it; nothing recorded.
        (pending(3), Some(2), Some(&fresh), "Always", None, Some(2)),
        // Nothing running or halted: nothing to restart.
        (pending(3), Some(2), None, "Always", None, Some(2)),
        (pending(3), Some(2), Some(&old), "Halted", None, Some(2)),
        // No transition time: not provably older, kept.
        (
            Some(Pending {
                generation: 3,
                since: None,
            }),
            None,
            Some(&old),
            "Always",
            None,
            None,
        ),
        // Manual (no pending passed in): nothing.
        (None, None, Some(&old), "Always", None, None),
    ];
    for (pending, last_generation, v, strategy, delete, recorded) in cases {
        let got = decide(&Inputs {
            pending,
            last_generation,
            strategy,
            ..inputs(None, None, v)
        });
        assert_eq!(
            got.delete_vmi, delete,
            "{pending:?} {last_generation:?} {strategy}"
        );
        assert_eq!(
            got.last_restart_generation, recorded,
            "{pending:?} {last_generation:?}"
        );
    }
}

#[test]
fn one_restart_serves_a_request_and_a_pending_change() {
    let old = vmi("2026-11-25T09:00:00Z");
    let got = decide(&Inputs {
        pending: Some(Pending {
            generation: 5,
            since: "2026-11-25T09:30:00Z".parse().ok(),
        }),
        ..inputs(Some(T), None, Some(&old))
    });
    assert_eq!(
        got,
        Restart {
            delete_vmi: Some(("m".into(), "u1".into(), Cause::Requested(T.into()))),
            last_restart: Some(T.into()),
            last_restart_generation: Some(5),
        }
    );
}

fn vm(status: serde_json::Value) -> VirtualMachine {
    serde_json::from_value(serde_json::json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "m"}, "spec": {"template": {"spec": {"domain": {"devices": {}}}}}, "status": status}))
    .expect("VM")
}

#[test]
fn restart_required_mirrors_kubevirt_with_its_transition() {
    let v = vm(serde_json::json!({"printableStatus": "Provisioning"}));
    assert_eq!(restart_required(Some(&v)), None);
    assert_eq!(restart_required_since(Some(&v)), None);
    let v = vm(
        serde_json::json!({"printableStatus": "Running", "conditions": [
        {"type": "RestartRequired", "status": "True", "lastTransitionTime": T,
         "message": "a non-live-updatable field was changed in the template spec"}]}),
    );
    assert_eq!(
        restart_required(Some(&v)),
        Some((
            "RestartRequired".into(),
            "a non-live-updatable field was changed in the template spec".into()
        ))
    );
    assert_eq!(restart_required_since(Some(&v)), Some(T.parse().ok()));
    let v = vm(serde_json::json!({"conditions": [{"type": "RestartRequired", "status": "False"}]}));
    assert_eq!(restart_required(Some(&v)), None);
    assert_eq!(restart_required_since(Some(&v)), None);
}
