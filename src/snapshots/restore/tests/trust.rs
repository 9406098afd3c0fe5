//! Issue 32: the commit point (every restored claim proven before an old disk is deleted), the
//! failure paths after it (each waits, holding the Machine), the Machine pinned by uid, and what
//! an ended restore does.

use super::later::recorded;
use super::*;
use crate::api::snapshots::RESTORE_FINALIZER;

fn gone() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

pub(super) fn restored(uid: &str, provenance: Provenance, bound: bool) -> ClaimView {
    ClaimView {
        uid: uid.into(),
        ours: false,
        bound,
        provenance,
    }
}

#[test]
fn nothing_is_deleted_for_a_restored_claim_not_proven_kubevirts_and_bound() {
    let restoring = restore(Some(phase::RESTORING), vec![], Some(true));
    let done = vm_restore(complete(&["root", "data"]));
    let good = kubevirts("root");
    let cases = [
        (
            "planted under the predictable name, annotation copied",
            restored(
                "planted",
                Provenance {
                    restore_name: Some("undo".into()),
                    ..Provenance::default()
                },
                true,
            ),
            Step::Fail(format!(
                "the restored claim {} is not KubeVirt's for this restore: the Machine's VM \
                 does not control it",
                r("root")
            )),
        ),
        (
            "for another restore",
            restored(
                "other",
                Provenance {
                    restore_name: Some("other".into()),
                    ..good.clone()
                },
                true,
            ),
            Step::Fail(format!(
                "the restored claim {} is not KubeVirt's for this restore: its \
                 restore.kubevirt.io/name is not undo",
                r("root")
            )),
        ),
        (
            "from another VolumeSnapshot",
            restored(
                "elsewhere",
                Provenance {
                    volume_snapshot: Some("mine".into()),
                    ..good.clone()
                },
                true,
            ),
            Step::Fail(format!(
                "the restored claim {} is not KubeVirt's for this restore: its dataSource is \
                 not the VolumeSnapshot {}",
                r("root"),
                snap("root")
            )),
        ),
        (
            "KubeVirt's, not bound (WaitForFirstConsumer): a consumer Pod, nothing deleted",
            restored("new-root", good.clone(), false),
            Step::Bind(vec![r("root")]),
        ),
    ];
    for (case, root, step) in cases {
        let mut c = claims(&[
            ("web-root", "old-root", true),
            ("web-data", "old-data", true),
            (&r("data"), "new-data", false),
        ]);
        c.insert(r("root"), root);
        let seen = Seen {
            restore: Some(&restoring),
            machine: Some(machine()),
            vm: Some(vm(false, &[])),
            vm_restore: Some(&done),
            claims: c,
            ..Seen::default()
        };
        assert_eq!(next(&seen), step, "{case}");
    }
}

#[test]
fn after_the_commit_point_every_failure_waits_holding_the_machine() {
    let adopting = restore(
        Some(phase::ADOPTING),
        recorded(&[("root", "old-root", false), ("data", "old-data", false)]),
        Some(true),
    );
    let mut deleted = adopting.clone();
    deleted.metadata.deletion_timestamp = Some(gone());
    // web-root deleted; web-data not yet.
    let base = || {
        claims(&[
            ("web-data", "old-data", true),
            (&r("root"), "new-root", false),
            (&r("data"), "new-data", false),
        ])
    };
    let seen = |restore, machine, claims| Seen {
        restore: Some(restore),
        machine,
        vm: Some(vm(false, &[])),
        claims,
        ..Seen::default()
    };
    let with = |name: &str, c: ClaimView| {
        let mut all = base();
        all.insert(name.into(), c);
        all
    };
    let why = |step: Step| match step {
        Step::Wait {
            phase: phase::ADOPTING,
            why: Some(why),
        } => why,
        other => panic!("not held: {other:?}"),
    };
    let planted = restored("planted", Provenance::default(), true);
    let held = [
        (
            "the restored claim replaced by a planted one",
            seen(
                &adopting,
                Some(machine()),
                with(&r("root"), planted.clone()),
            ),
            "data at risk: the restored claim web-root-restore-0a1b2c3d is not KubeVirt's",
        ),
        (
            "the restored claim unbound",
            seen(
                &adopting,
                Some(machine()),
                with(&r("root"), restored("new-root", kubevirts("root"), false)),
            ),
            "data at risk: the restored claim web-root-restore-0a1b2c3d is not bound",
        ),
        (
            "web-root planted with the Machine's proof copied",
            seen(
                &adopting,
                Some(machine()),
                with(
                    "web-root",
                    ClaimView {
                        ours: true,
                        ..planted.clone()
                    },
                ),
            ),
            "data at risk: claim web-root is not one this restore made",
        ),
        (
            "the Machine gone",
            seen(&adopting, None, base()),
            "data at risk: Machine web is gone or made again mid-restore",
        ),
    ];
    for (case, seen, start) in held {
        let why = why(next(&seen));
        assert!(why.starts_with(start), "{case}: {why}");
        assert!(holds(Some(phase::ADOPTING)), "{case}");
    }
    // Made again, not bound yet: the restore waits before starting the VM on it.
    let unbound = with(
        "web-root",
        ClaimView {
            uid: "made-root".into(),
            ours: true,
            bound: false,
            provenance: Provenance::default(),
        },
    );
    let mut all_made = unbound.clone();
    all_made.insert(
        "web-data".into(),
        restored("made-data", Provenance::default(), true),
    );
    assert_eq!(
        next(&seen(&adopting, Some(machine()), all_made)),
        Step::Bind(vec!["web-root".into()])
    );
    // Deleted mid-Adopting, or a leader without KubeVirt's snapshot API: it goes on.
    let going_on = Step::CreateClaim {
        name: "web-root".into(),
        from: r("root"),
    };
    assert_eq!(next(&seen(&deleted, Some(machine()), base())), going_on);
    let no_api = Seen {
        no_snapshot_api: true,
        ..seen(&adopting, Some(machine()), base())
    };
    assert_eq!(next(&no_api), going_on);
    // The Machine being deleted: it goes on too (its deletion waits for it).
    let deleting = MachineView {
        deleting: true,
        ..machine()
    };
    assert_eq!(next(&seen(&adopting, Some(deleting), base())), going_on);
}

#[test]
fn before_the_commit_point_a_restore_ends_with_the_old_disks() {
    for p in [phase::PENDING, phase::STOPPING, phase::RESTORING] {
        let mut r = restore(Some(p), vec![], Some(true));
        r.status.as_mut().expect("status").machine_uid = Some("uid-m".into());
        let mut deleted = r.clone();
        deleted.metadata.deletion_timestamp = Some(gone());
        let seen = |restore, machine: MachineView, no_snapshot_api| Seen {
            restore: Some(restore),
            machine: Some(machine),
            vm: Some(vm(false, &[])),
            no_snapshot_api,
            ..Seen::default()
        };
        let deleting = MachineView {
            deleting: true,
            ..machine()
        };
        let remade = MachineView {
            uid: "uid-other".into(),
            ..machine()
        };
        let failed = |s: &Seen| matches!(next(s), Step::Fail(_));
        assert!(failed(&seen(&deleted, machine(), false)), "{p}: deleted");
        assert!(failed(&seen(&r, deleting, false)), "{p}: Machine deleted");
        assert!(failed(&seen(&r, machine(), true)), "{p}: no snapshot API");
        if p != phase::PENDING {
            assert!(failed(&seen(&r, remade, false)), "{p}: Machine made again");
        }
    }
}

#[test]
fn starting_ends_once_a_deleted_machine_has_its_disks_back() {
    let starting = restore(Some(phase::STARTING), vec![], Some(true));
    let deleting = MachineView {
        deleting: true,
        ..machine()
    };
    for machine in [Some(deleting), None] {
        let seen = Seen {
            restore: Some(&starting),
            machine,
            ..Seen::default()
        };
        assert_eq!(next(&seen), Step::Succeed);
    }
}

#[test]
fn an_ended_restore_deletes_its_restored_claims_then_lets_go() {
    let mut disks = recorded(&[("root", "old-root", false), ("data", "old-data", false)]);
    disks[0].restored_uid = Some("new-root".into());
    disks[1].restored_uid = Some("new-data".into());
    let with = |p, keep: bool, finalizer: bool| {
        let mut r = restore(Some(p), disks.clone(), Some(true));
        r.spec.keep_restored_claims = keep;
        if finalizer {
            r.metadata.finalizers = Some(vec![RESTORE_FINALIZER.into()]);
        }
        r
    };
    let both = claims(&[
        (&r("root"), "new-root", false),
        (&r("data"), "new-data", false),
    ]);
    let planted = claims(&[(&r("root"), "planted", false)]);
    let seen = |r, claims| Seen {
        restore: Some(r),
        claims,
        ..Seen::default()
    };
    let succeeded = with(phase::SUCCEEDED, false, true);
    assert_eq!(
        next(&seen(&succeeded, both.clone())),
        Step::DeleteClaim {
            name: r("root"),
            uid: "new-root".into()
        }
    );
    assert_eq!(
        next(&seen(&succeeded, planted)),
        Step::Release,
        "a claim planted under the name is not the restore's to delete"
    );
    let kept = with(phase::SUCCEEDED, true, true);
    assert_eq!(next(&seen(&kept, both.clone())), Step::Release);
    let failed = with(phase::FAILED, false, true);
    assert_eq!(next(&seen(&failed, both.clone())), Step::Release);
    let released = with(phase::SUCCEEDED, false, false);
    assert!(matches!(
        next(&seen(&released, BTreeMap::new())),
        Step::Wait {
            phase: phase::SUCCEEDED,
            ..
        }
    ));
}

#[test]
fn a_restore_is_held_by_its_finalizer_until_it_ended() {
    for (p, deleting, finalizer, needs) in [
        (None, false, false, true),
        (Some(phase::ADOPTING), false, false, true),
        (Some(phase::ADOPTING), false, true, false),
        (Some(phase::PENDING), true, false, false),
        (Some(phase::SUCCEEDED), false, false, false),
        (Some(phase::FAILED), false, false, false),
    ] {
        let mut r = restore(p, vec![], None);
        if deleting {
            r.metadata.deletion_timestamp = Some(gone());
        }
        if finalizer {
            r.metadata.finalizers = Some(vec![RESTORE_FINALIZER.into()]);
        }
        assert_eq!(needs_finalizer(&r), needs, "{p:?} {deleting} {finalizer}");
    }
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

#[test]
fn what_is_not_the_machines_fails_a_restore_only_before_the_commit_point() {
    let why = || "VirtualMachine web is not the Machine's".to_owned();
    for (p, step) in [
        (None, Some(Step::Fail(why()))),
        (Some(phase::STOPPING), Some(Step::Fail(why()))),
        (Some(phase::RESTORING), Some(Step::Fail(why()))),
        (
            Some(phase::ADOPTING),
            Some(Step::Wait {
                phase: phase::ADOPTING,
                why: Some(format!("data at risk: {}", why())),
            }),
        ),
        (
            Some(phase::STARTING),
            Some(Step::Wait {
                phase: phase::STARTING,
                why: Some(format!("data at risk: {}", why())),
            }),
        ),
        (Some(phase::SUCCEEDED), None),
        (Some(phase::FAILED), None),
    ] {
        assert_eq!(refuse(p, why()), step, "{p:?}");
    }
}
