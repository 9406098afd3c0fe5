//! A pending restore: the Machine and the snapshot checked before anything is stopped.

use super::*;

#[test]
fn pending_checks_the_machine_and_the_snapshot_before_stopping() {
    let pending = restore(None, vec![], None);
    let ready = snapshot("web", "uid-m", true);
    let other = snapshot("db", "uid-d", true);
    let recreated = snapshot("web", "uid-old", true);
    let not_ready = snapshot("web", "uid-m", false);
    let cases: Vec<(&str, Seen, Step)> = vec![
        (
            "no Machine",
            Seen {
                restore: Some(&pending),
                snapshot: Some(&ready),
                ..Seen::default()
            },
            Step::Fail("Machine web not found".into()),
        ),
        (
            "no snapshot",
            Seen {
                restore: Some(&pending),
                machine: Some(machine()),
                ..Seen::default()
            },
            Step::Fail("MachineSnapshot web-before not found".into()),
        ),
        (
            "another Machine's snapshot",
            Seen {
                restore: Some(&pending),
                machine: Some(machine()),
                snapshot: Some(&other),
                ..Seen::default()
            },
            Step::Fail("MachineSnapshot web-before is a snapshot of another Machine".into()),
        ),
        (
            "a snapshot of an earlier Machine of the same name, not allowed",
            Seen {
                restore: Some(&pending),
                machine: Some(machine()),
                snapshot: Some(&recreated),
                ..Seen::default()
            },
            Step::Fail(
                "MachineSnapshot web-before is a snapshot of an earlier Machine named web \
                 (uid uid-old); set spec.allowEarlierMachine: true to restore it into this one"
                    .into(),
            ),
        ),
        (
            "disks with a source and CD-ROMs are no reason to refuse",
            Seen {
                restore: Some(&pending),
                machine: Some(imaged()),
                snapshot: Some(&ready),
                vm: Some(vm(true, &[])),
                vmi: true,
                ..Seen::default()
            },
            Step::StopVm { was_running: true },
        ),
        (
            "snapshot not ready",
            Seen {
                restore: Some(&pending),
                machine: Some(machine()),
                snapshot: Some(&not_ready),
                vm: Some(vm(true, &[])),
                ..Seen::default()
            },
            Step::Wait {
                phase: phase::PENDING,
                why: Some("MachineSnapshot web-before is not ready to use".into()),
            },
        ),
        (
            "a running VM is stopped, and remembered as running",
            Seen {
                restore: Some(&pending),
                machine: Some(machine()),
                snapshot: Some(&ready),
                vm: Some(vm(true, &[])),
                vmi: true,
                ..Seen::default()
            },
            Step::StopVm { was_running: true },
        ),
        (
            "a halted VM is remembered as halted",
            Seen {
                restore: Some(&pending),
                machine: Some(machine()),
                snapshot: Some(&ready),
                vm: Some(vm(false, &[])),
                ..Seen::default()
            },
            Step::StopVm { was_running: false },
        ),
    ];
    for (case, seen, step) in cases {
        assert_eq!(next(&seen), step, "{case}");
    }
    let second = Seen {
        restore: Some(&pending),
        machine: Some(machine()),
        snapshot: Some(&ready),
        vm: Some(vm(true, &[])),
        another: Some("first".into()),
        ..Seen::default()
    };
    assert_eq!(
        next(&second),
        Step::Wait {
            phase: phase::PENDING,
            why: Some("MachineRestore first is restoring Machine web".into()),
        },
        "one restore of a Machine at a time"
    );
}
