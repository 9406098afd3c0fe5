use super::*;
use crate::api::MachineStatus;

const NOW: &str = "2026-11-28T15:00:00Z";
const EARLIER: &str = "2026-11-28T14:00:00Z";

struct M {
    strategy: Option<&'static str>,
    stopped: bool,
    vmi: bool,
    deleting: bool,
}

const RUNS: M = M {
    strategy: None,
    stopped: false,
    vmi: true,
    deleting: false,
};

fn machine(m: M) -> Machine {
    let mut machine: Machine = serde_json::from_value(serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1",
        "kind": "Machine",
        "metadata": { "name": "vm-1", "namespace": "team-a" },
        "spec": { "runStrategy": m.strategy },
    }))
    .expect("a Machine");
    if m.stopped {
        machine.metadata.annotations =
            Some([(STOPPED_AT_ANNOTATION.to_owned(), EARLIER.to_owned())].into());
    }
    machine.status = Some(MachineStatus {
        vmi_name: m.vmi.then(|| "vm-1".to_owned()),
        cluster: Some("dc1".to_owned()),
        ..Default::default()
    });
    if m.deleting {
        machine.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
        );
    }
    machine
}

fn vmi() -> Target {
    Target {
        cluster: Some("dc1".to_owned()),
        namespace: "team-a".to_owned(),
        vmi: "vm-1".to_owned(),
    }
}

fn stop_record() -> Option<Record> {
    Some(Record::Set(STOPPED_AT_ANNOTATION, NOW.to_owned()))
}

fn plan(record: Option<Record>, kubevirt_stop: Option<(Target, i64)>, delete: bool) -> Plan {
    Plan {
        kubevirt_stop,
        record,
        delete_vmi: delete.then(vmi),
    }
}

/// (case, button, options, the Machine, the plan or the refusal)
type Case = (&'static str, Button, Options, M, Result<Plan, Refused>);

#[test]
fn each_button_is_recorded_on_the_machine_or_refused() {
    let grace = |g| Options { grace: Some(g) };
    let none = Options::default();
    let name = || "vm-1".to_owned();
    let cases: Vec<Case> = vec![
        (
            "stop",
            Button::Stop,
            none,
            RUNS,
            Ok(plan(stop_record(), None, false)),
        ),
        (
            "stop with a grace: KubeVirt's stop first",
            Button::Stop,
            grace(300),
            RUNS,
            Ok(plan(stop_record(), Some((vmi(), 300)), false)),
        ),
        (
            "stop with a grace, no VMI: recorded only",
            Button::Stop,
            grace(300),
            M { vmi: false, ..RUNS },
            Ok(plan(stop_record(), None, false)),
        ),
        (
            "stop, Halted by the spec",
            Button::Stop,
            none,
            M {
                strategy: Some("Halted"),
                ..RUNS
            },
            Err(Refused::HaltedBySpec(name(), "stop")),
        ),
        (
            "stop, stopped already",
            Button::Stop,
            none,
            M {
                stopped: true,
                ..RUNS
            },
            Err(Refused::AlreadyStopped(name(), EARLIER.to_owned())),
        ),
        (
            "stop, deleting",
            Button::Stop,
            none,
            M {
                deleting: true,
                ..RUNS
            },
            Err(Refused::Deleting(name())),
        ),
        (
            "forcestop: recorded, then the VMI deleted",
            Button::ForceStop,
            none,
            RUNS,
            Ok(plan(stop_record(), None, true)),
        ),
        (
            "forcestop of a stop still shutting down: the VMI only",
            Button::ForceStop,
            none,
            M {
                stopped: true,
                ..RUNS
            },
            Ok(plan(None, None, true)),
        ),
        (
            "forcestop, Halted by the spec, VMI still there: the VMI only",
            Button::ForceStop,
            none,
            M {
                strategy: Some("Halted"),
                ..RUNS
            },
            Ok(plan(None, None, true)),
        ),
        (
            "forcestop, no VMI",
            Button::ForceStop,
            none,
            M { vmi: false, ..RUNS },
            Err(Refused::NotRunning(name())),
        ),
        (
            "forcestop, deleting",
            Button::ForceStop,
            none,
            M {
                deleting: true,
                ..RUNS
            },
            Err(Refused::Deleting(name())),
        ),
        (
            "start a stopped Machine",
            Button::Start,
            none,
            M {
                stopped: true,
                vmi: false,
                ..RUNS
            },
            Ok(plan(
                Some(Record::Remove(STOPPED_AT_ANNOTATION)),
                None,
                false,
            )),
        ),
        (
            "start, not stopped",
            Button::Start,
            none,
            RUNS,
            Err(Refused::NotStopped(name())),
        ),
        (
            "start, Halted by the spec",
            Button::Start,
            none,
            M {
                strategy: Some("Halted"),
                stopped: true,
                ..RUNS
            },
            Err(Refused::HaltedBySpec(name(), "start")),
        ),
        (
            "restart",
            Button::Restart,
            none,
            RUNS,
            Ok(plan(
                Some(Record::Set(RESTARTED_AT_ANNOTATION, NOW.to_owned())),
                None,
                false,
            )),
        ),
        (
            "restart, Manual: recorded",
            Button::Restart,
            none,
            M {
                strategy: Some("Manual"),
                ..RUNS
            },
            Ok(plan(
                Some(Record::Set(RESTARTED_AT_ANNOTATION, NOW.to_owned())),
                None,
                false,
            )),
        ),
        (
            "restart, Halted by the spec",
            Button::Restart,
            none,
            M {
                strategy: Some("Halted"),
                ..RUNS
            },
            Err(Refused::HaltedBySpec(name(), "restart")),
        ),
        (
            "restart, stopped",
            Button::Restart,
            none,
            M {
                stopped: true,
                ..RUNS
            },
            Err(Refused::Stopped(name(), EARLIER.to_owned())),
        ),
        (
            "restart, deleting",
            Button::Restart,
            none,
            M {
                deleting: true,
                ..RUNS
            },
            Err(Refused::Deleting(name())),
        ),
    ];
    let now: Timestamp = NOW.parse().expect("now");
    for (case, button, options, m, want) in cases {
        assert_eq!(decide(button, options, &machine(m), now), want, "{case}");
    }
}

#[test]
fn bodies_are_kubevirts_options_and_bounded() {
    let unsupported = |field, button: Button, hint| {
        Err(BadOptions::Unsupported {
            field,
            button: button.as_str(),
            hint,
        })
    };
    let grace = |g| Ok(Options { grace: Some(g) });
    // (button, body, options or the error)
    let cases: Vec<(Button, &str, Result<Options, BadOptions>)> = vec![
        (Button::Stop, "", Ok(Options::default())),
        (Button::Stop, " \n", Ok(Options::default())),
        (Button::Stop, "{}", Ok(Options::default())),
        (Button::Stop, r#"{"gracePeriod": 300}"#, grace(300)),
        (Button::Stop, r#"{"gracePeriod": 0}"#, grace(0)),
        (Button::Stop, r#"{"gracePeriod": 86400}"#, grace(86400)),
        (
            Button::Stop,
            r#"{"kind": "StopOptions", "apiVersion": "subresources.kubevirt.io/v1", "gracePeriod": 5}"#,
            grace(5),
        ),
        (
            Button::Stop,
            r#"{"gracePeriod": 86401}"#,
            Err(BadOptions::Grace(86401)),
        ),
        (
            Button::Stop,
            r#"{"gracePeriod": -1}"#,
            Err(BadOptions::Grace(-1)),
        ),
        (
            Button::Stop,
            r#"{"dryRun": ["All"]}"#,
            unsupported("dryRun", Button::Stop, ""),
        ),
        (
            Button::ForceStop,
            r#"{"gracePeriod": 30}"#,
            unsupported("gracePeriod", Button::ForceStop, ": it is always 0"),
        ),
        (
            Button::Start,
            r#"{"paused": true}"#,
            unsupported("paused", Button::Start, ": unpause it after start"),
        ),
        (
            Button::Start,
            r#"{"paused": false}"#,
            Ok(Options::default()),
        ),
        (
            Button::Restart,
            r#"{"gracePeriodSeconds": 0}"#,
            unsupported(
                "gracePeriodSeconds",
                Button::Restart,
                ": stop with gracePeriod, then start",
            ),
        ),
        (
            Button::Restart,
            r#"{"gracePeriod": 10}"#,
            unsupported("gracePeriod", Button::Restart, ""),
        ),
    ];
    for (button, body, want) in cases {
        assert_eq!(options(button, body.as_bytes()), want, "{button:?} {body}");
    }
    let e = options(Button::Stop, br#"{"gracePeriod": "5m"}"#).expect_err("a string");
    assert!(matches!(e, BadOptions::NotJson("stop", _)), "{e:?}");
    let huge = vec![b' '; MAX_BODY_BYTES + 1];
    assert_eq!(options(Button::Stop, &huge), Err(BadOptions::TooLarge));
    assert!(
        BadOptions::Grace(99999)
            .to_string()
            .starts_with("gracePeriod: Invalid value: 99999"),
        "the error names the field"
    );
}

#[test]
fn each_button_has_its_name_and_kubevirts_stop_is_the_vms() {
    for button in Button::ALL {
        assert_eq!(Button::parse(button.as_str()), Some(button));
        assert_eq!(super::super::power::Power::parse(button.as_str()), None);
    }
    assert_eq!(Button::parse("pause"), None);
    assert_eq!(
        kubevirt_stop_path(&vmi()),
        "/apis/subresources.kubevirt.io/v1/namespaces/team-a/virtualmachines/vm-1/stop"
    );
    assert_eq!(kubevirt_stop_body(300), br#"{"gracePeriod":300}"#);
}
