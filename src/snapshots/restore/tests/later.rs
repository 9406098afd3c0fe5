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
            data_volume: false,
            volume_snapshot: Some(snap("root")),
            made_uid: Some("adopted-root".into()),
            ..RestoredDisk::default()
        },
        RestoredDisk {
            name: "data".into(),
            restored_claim: r("data"),
            previous_uid: Some("old-data".into()),
            size: None,
            data_volume: false,
            volume_snapshot: Some(snap("data")),
            made_uid: Some("adopted-data".into()),
            ..RestoredDisk::default()
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
            at_risk("claim web-root", "web-root", &r("root")),
        ),
    ];
    for (case, claims, step) in cases {
        assert_eq!(next(&seen(claims)), step, "{case}");
    }
}

/// Past the commit point, `what` under `name` is not the one the restore made: it waits.
pub(super) fn at_risk(what: &str, name: &str, from: &str) -> Step {
    Step::Wait {
        phase: phase::ADOPTING,
        why: Some(format!(
            "data at risk: {what} is not one this restore made, and is left alone; delete it to \
             let the restore make {name} again from the restored claim {from}"
        )),
    }
}

pub(super) fn recorded(disks: &[(&str, &str, bool)]) -> Vec<RestoredDisk> {
    disks
        .iter()
        .map(|(d, uid, data_volume)| RestoredDisk {
            name: (*d).into(),
            restored_claim: r(d),
            previous_uid: Some((*uid).into()),
            size: None,
            data_volume: *data_volume,
            volume_snapshot: Some(snap(d)),
            made_uid: Some(if *data_volume {
                format!("made-{d}-dv")
            } else {
                format!("made-{d}")
            }),
            ..RestoredDisk::default()
        })
        .collect()
}

#[test]
fn adopting_a_disk_with_a_source_replaces_its_data_volume_once_cdis_claim_is_gone() {
    let adopting = restore(
        Some(phase::ADOPTING),
        recorded(&[("data", "old-data", false), ("root", "old-root-dv", true)]),
        Some(true),
    );
    let restored = [(r("data"), "new-data"), (r("root"), "new-root")];
    // (claims besides the restored ones, DataVolumes)
    let seen = |list: &[(&str, &str, bool)], dvs: &[(&str, &str, bool)]| {
        let mut c = claims(list);
        c.extend(claims(&[
            (&restored[0].0, restored[0].1, false),
            (&restored[1].0, restored[1].1, false),
        ]));
        Seen {
            restore: Some(&adopting),
            machine: Some(imaged()),
            vm: Some(vm(false, &[])),
            claims: c,
            data_volumes: claims(dvs),
            ..Seen::default()
        }
    };
    let cdis_old = ("web-root", "cdi-old", false);
    let cases = [
        (
            "the blank disk first",
            seen(
                &[("web-data", "old-data", true), cdis_old],
                &[("web-root", "old-root-dv", true)],
            ),
            Step::DeleteClaim {
                name: "web-data".into(),
                uid: "old-data".into(),
            },
        ),
        (
            "then the recorded DataVolume, by uid",
            seen(
                &[("web-data", "made-data", true), cdis_old],
                &[("web-root", "old-root-dv", true)],
            ),
            Step::DeleteDataVolume {
                name: "web-root".into(),
                uid: "old-root-dv".into(),
            },
        ),
        (
            "CDI's claim of it is waited for",
            seen(&[("web-data", "made-data", true), cdis_old], &[]),
            Step::Wait {
                phase: phase::ADOPTING,
                why: Some(
                    "waiting for the claim web-root of the replaced DataVolume to be deleted"
                        .into(),
                ),
            },
        ),
        (
            "then it is made again, a clone of its restored claim",
            seen(&[("web-data", "made-data", true)], &[]),
            Step::CreateDataVolume {
                name: "web-root".into(),
                from: r("root"),
            },
        ),
        (
            "made again (CDI's new claim beside it): on to starting",
            seen(
                &[
                    ("web-data", "made-data", true),
                    ("web-root", "cdi-new", false),
                ],
                &[("web-root", "made-root-dv", true)],
            ),
            Step::Advance(phase::STARTING),
        ),
        (
            "a foreign DataVolume planted in between is never touched",
            seen(
                &[("web-data", "made-data", true)],
                &[("web-root", "planted", false)],
            ),
            at_risk("DataVolume web-root", "web-root", &r("root")),
        ),
        (
            "a recorded DataVolume no longer proven the Machine's is not deleted",
            seen(
                &[("web-data", "made-data", true)],
                &[("web-root", "old-root-dv", false)],
            ),
            at_risk("DataVolume web-root", "web-root", &r("root")),
        ),
    ];
    for (case, seen, step) in cases {
        assert_eq!(next(&seen), step, "{case}");
    }
}

#[test]
fn a_lost_restored_claim_never_frees_the_machine_to_make_an_empty_disk() {
    let adopting = restore(
        Some(phase::ADOPTING),
        recorded(&[("root", "old-root", false), ("data", "old-data", false)]),
        Some(true),
    );
    let seen = |list: &[(&str, &str, bool)]| Seen {
        restore: Some(&adopting),
        machine: Some(machine()),
        vm: Some(vm(false, &[])),
        claims: claims(list),
        ..Seen::default()
    };
    // Gone before anything was deleted: failed, every old disk kept (the reconciler puts the VM
    // back on them).
    assert_eq!(
        next(&seen(&[
            ("web-root", "old-root", true),
            ("web-data", "old-data", true),
            (&r("data"), "new-data", false),
        ])),
        Step::Fail(format!(
            "the restored claim {} is gone: the Machine keeps its disks as they were",
            r("root")
        ))
    );
    // Gone after its old claim was deleted: the restore holds the Machine (still Adopting) and
    // says what is lost, while the disks that can be restored still are.
    assert_eq!(
        next(&seen(&[
            ("web-data", "old-data", true),
            (&r("data"), "new-data", false),
        ])),
        Step::DeleteClaim {
            name: "web-data".into(),
            uid: "old-data".into()
        }
    );
    let held = next(&seen(&[
        ("web-data", "made-data", true),
        (&r("data"), "new-data", false),
    ]));
    let Step::Wait {
        phase: phase::ADOPTING,
        why: Some(why),
    } = held
    else {
        panic!("held: {held:?}");
    };
    assert!(
        why.starts_with(&format!(
            "data lost: the restored claim(s) {} of disk(s) root are gone",
            r("root")
        )),
        "{why}"
    );
    assert!(why.contains("MachineSnapshot web-before"), "{why}");
    assert!(holds(Some(phase::ADOPTING)), "the reconciler stays held");
    // Made again by an admin: the restore goes on by itself.
    assert_eq!(
        next(&seen(&[
            ("web-data", "made-data", true),
            (&r("root"), "remade", false),
            (&r("data"), "new-data", false),
        ])),
        Step::CreateClaim {
            name: "web-root".into(),
            from: r("root")
        }
    );
    // Gone while its old claim is still there, after another disk was replaced: that disk keeps
    // its data (nothing empty: it still has its claim), and the restore says so.
    assert_eq!(
        next(&seen(&[
            ("web-root", "made-root", true),
            ("web-data", "old-data", true),
            (&r("root"), "new-root", false),
        ])),
        Step::Fail(
            "the restored claim(s) of disk(s) data are gone: they keep their data from before \
             the restore, the other disks are restored"
                .into()
        )
    );
}

#[test]
fn starting_follows_what_the_machine_asks_now() {
    let running = restore(Some(phase::STARTING), vec![], Some(true));
    let halted_since = MachineView {
        wants_running: false,
        ..machine()
    };
    let back = |runs| vm(runs, &["web-root", "web-data"]);
    let seen = |m: MachineView, vm_| Seen {
        restore: Some(&running),
        machine: Some(m),
        vm: Some(vm_),
        ..Seen::default()
    };
    // Halted by its user during the restore: done once the VM is back on its disks, halted.
    assert_eq!(
        next(&seen(halted_since.clone(), back(false))),
        Step::Succeed
    );
    assert_eq!(
        next(&seen(halted_since, back(true))),
        Step::Wait {
            phase: phase::STARTING,
            why: Some("waiting for the VM to halt as the Machine asks".into())
        }
    );
    // A disk with a source: its DataVolume must be there too.
    let on_dv = vm(true, &["web-data", "web-root"]);
    assert!(matches!(
        next(&seen(imaged(), on_dv.clone())),
        Step::Wait {
            phase: phase::STARTING,
            ..
        }
    ));
    let with_dv = Seen {
        data_volumes: claims(&[("web-root", "made-root-dv", true)]),
        ..seen(imaged(), on_dv)
    };
    assert_eq!(next(&with_dv), Step::Succeed);
}

#[test]
fn starting_waits_for_the_vm_back_on_the_machines_disks() {
    let starting = restore(Some(phase::STARTING), vec![], Some(true));
    let seen = |wants_running, vm_| Seen {
        restore: Some(&starting),
        machine: Some(MachineView {
            wants_running,
            ..machine()
        }),
        vm: Some(vm_),
        ..Seen::default()
    };
    let on_restored = vm(false, &[&r("root"), &r("data")]);
    let back = |runs| vm(runs, &["web-root", "web-data"]);
    assert!(matches!(
        next(&seen(true, on_restored)),
        Step::Wait {
            phase: phase::STARTING,
            ..
        }
    ));
    assert_eq!(
        next(&seen(true, back(false))),
        Step::Wait {
            phase: phase::STARTING,
            why: Some("waiting for the VM to start as the Machine asks".into())
        }
    );
    assert_eq!(next(&seen(true, back(true))), Step::Succeed);
    assert_eq!(next(&seen(false, back(false))), Step::Succeed);
}
