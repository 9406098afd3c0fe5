//! The steps after KubeVirt restored the disks: adopting, starting, and what holds.

use super::*;

#[test]
fn adopting_replaces_each_claim_once_and_only_the_recorded_one() {
    let recorded = vec![
        RestoredDisk {
            name: "root".into(),
            restored_claim: r("root"),
            previous_uid: Some("old-root".into()),
            size: None,
        },
        RestoredDisk {
            name: "data".into(),
            restored_claim: r("data"),
            previous_uid: Some("old-data".into()),
            size: None,
        },
    ];
    let adopting = restore(Some(phase::ADOPTING), recorded, Some(true));
    let seen = |claims| Seen {
        restore: Some(&adopting),
        machine: Some(machine()),
        vm: Some(vm(false, &[])),
        claims,
        ..Seen::default()
    };
    let restored = [(r("root"), "new-root"), (r("data"), "new-data")];
    let with = |list: &[(&str, &str, bool)]| {
        let mut c = claims(list);
        c.extend(claims(&[
            (&restored[0].0, restored[0].1, false),
            (&restored[1].0, restored[1].1, false),
        ]));
        c
    };
    let cases = [
        (
            "the old root claim is deleted first",
            with(&[
                ("web-root", "old-root", true),
                ("web-data", "old-data", true),
            ]),
            Step::DeleteClaim {
                name: "web-root".into(),
                uid: "old-root".into(),
            },
        ),
        (
            "then made again from its restored claim",
            with(&[("web-data", "old-data", true)]),
            Step::CreateClaim {
                name: "web-root".into(),
                from: r("root"),
            },
        ),
        (
            "a made-again claim is not deleted again",
            with(&[
                ("web-root", "adopted-root", true),
                ("web-data", "old-data", true),
            ]),
            Step::DeleteClaim {
                name: "web-data".into(),
                uid: "old-data".into(),
            },
        ),
        (
            "all made again",
            with(&[
                ("web-root", "adopted-root", true),
                ("web-data", "adopted-data", true),
            ]),
            Step::Advance(phase::STARTING),
        ),
        (
            "a foreign claim planted in between is never touched",
            with(&[
                ("web-root", "planted", false),
                ("web-data", "old-data", true),
            ]),
            Step::Fail("claim web-root is not the Machine's".into()),
        ),
    ];
    for (case, claims, step) in cases {
        assert_eq!(next(&seen(claims)), step, "{case}");
    }
}

#[test]
fn starting_waits_for_the_vm_back_on_the_machines_disks() {
    let starting = |was| restore(Some(phase::STARTING), vec![], Some(was));
    let (running, halted) = (starting(true), starting(false));
    let seen = |r, vm_| Seen {
        restore: Some(r),
        machine: Some(machine()),
        vm: Some(vm_),
        ..Seen::default()
    };
    let on_restored = vm(false, &[&r("root"), &r("data")]);
    let back = |runs| vm(runs, &["web-root", "web-data"]);
    assert!(matches!(
        next(&seen(&running, on_restored)),
        Step::Wait {
            phase: phase::STARTING,
            ..
        }
    ));
    assert!(matches!(
        next(&seen(&running, back(false))),
        Step::Wait {
            phase: phase::STARTING,
            ..
        }
    ));
    assert_eq!(next(&seen(&running, back(true))), Step::Succeed);
    assert_eq!(next(&seen(&halted, back(false))), Step::Succeed);
}

#[test]
fn only_the_middle_steps_hold_the_reconciler() {
    for (p, held) in [
        (None, false),
        (Some(phase::PENDING), false),
        (Some(phase::STOPPING), true),
        (Some(phase::RESTORING), true),
        (Some(phase::ADOPTING), true),
        (Some(phase::STARTING), false),
        (Some(phase::SUCCEEDED), false),
        (Some(phase::FAILED), false),
    ] {
        assert_eq!(holds(p), held, "{p:?}");
    }
}
