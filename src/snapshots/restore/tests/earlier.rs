//! Issue 32: a snapshot of an earlier Machine of the same name is restored into the Machine made
//! again only when the author allows it (`spec.allowEarlierMachine`) and the operator proves it
//! took it of a Machine of that name; every uid the restore checks after is the new Machine's.

use super::*;

/// `restore` allowing a snapshot of an earlier Machine, in `phase`, pinned to `pinned`.
fn allowing(phase: Option<&str>, pinned: Option<&str>) -> MachineRestore {
    let mut r = restore(phase, vec![], Some(true));
    r.spec.allow_earlier_machine = true;
    if let Some(st) = r.status.as_mut() {
        st.machine_uid = pinned.map(str::to_owned);
    }
    r
}

#[test]
fn an_earlier_machines_snapshot_is_restored_only_when_allowed_and_proven() {
    let refused = restore(None, vec![], None);
    let allowed = allowing(None, None);
    // Taken of the Machine `web` before it was deleted and made again (now uid-m).
    let earlier = snapshot("web", "uid-old", true);
    let other = snapshot("db", "uid-old", true);
    let own = snapshot("web", "uid-m", true);
    let pending = |r, snap, proven: Option<&str>| Seen {
        restore: Some(r),
        machine: Some(machine()),
        snapshot: Some(snap),
        snapshot_proven_of: proven.map(str::to_owned),
        vm: Some(vm(true, &[])),
        vmi: true,
        ..Seen::default()
    };
    let not_proven = Step::Fail(
        "MachineSnapshot web-before is not proven taken by the operator of an earlier Machine \
         named web: not restored"
            .into(),
    );
    let cases: Vec<(&str, Seen, Step)> = vec![
        (
            "not allowed: refused, naming the field to set",
            pending(&refused, &earlier, Some("uid-old")),
            Step::Fail(
                "MachineSnapshot web-before is a snapshot of an earlier Machine named web \
                 (uid uid-old); set spec.allowEarlierMachine: true to restore it into this one"
                    .into(),
            ),
        ),
        (
            "allowed and proven: the VM is stopped, as for the Machine's own",
            pending(&allowed, &earlier, Some("uid-old")),
            Step::StopVm { was_running: true },
        ),
        (
            "allowed, but nothing proves the operator took it (a status alone says so)",
            pending(&allowed, &earlier, None),
            not_proven.clone(),
        ),
        (
            "allowed, but the proof is of another uid than the status says",
            pending(&allowed, &earlier, Some("uid-other")),
            not_proven,
        ),
        (
            "allowed never lets in another Machine's snapshot",
            pending(&allowed, &other, Some("uid-old")),
            Step::Fail("MachineSnapshot web-before is a snapshot of another Machine".into()),
        ),
        (
            "allowed, a snapshot of this very Machine: as always",
            pending(&allowed, &own, None),
            Step::StopVm { was_running: true },
        ),
    ];
    for (case, seen, step) in cases {
        assert_eq!(next(&seen), step, "{case}");
    }
}

#[test]
fn past_pending_an_earlier_machines_restore_binds_to_the_new_machines_uid() {
    let earlier = snapshot("web", "uid-old", true);
    let seen = |r, claims_: BTreeMap<String, ClaimView>, vm_restore_| Seen {
        restore: Some(r),
        machine: Some(machine()),
        snapshot: Some(&earlier),
        vm: Some(vm(false, &[])),
        vm_restore: vm_restore_,
        claims: claims_,
        ..Seen::default()
    };
    // Pinned to the Machine restored into (uid-m): it goes on.
    let restoring = allowing(Some(phase::RESTORING), Some("uid-m"));
    assert_eq!(
        next(&seen(&restoring, BTreeMap::new(), None)),
        Step::CreateVmRestore {
            overrides: vec![("root".into(), r("root")), ("data".into(), r("data"))]
        }
    );
    // Pinned to the snapshot's Machine instead: that Machine is gone, nothing is touched.
    let wrong = allowing(Some(phase::RESTORING), Some("uid-old"));
    assert_eq!(
        next(&seen(&wrong, BTreeMap::new(), None)),
        Step::Fail("Machine web is gone".into())
    );
    // The restored claims are proven by the new Machine's VM controlling them: a claim
    // controlled by the earlier Machine's VM is not KubeVirt's for this restore.
    let done = vm_restore(complete(&["root", "data"]));
    let mut old_vm = claims(&[
        (&r("root"), "uid-rr", false),
        (&r("data"), "uid-rd", false),
        ("web-root", "uid-root", true),
        ("web-data", "uid-data", true),
    ]);
    for c in old_vm.values_mut() {
        if c.provenance.controller_vm.is_some() {
            c.provenance.controller_vm = Some("uid-old-vm".into());
        }
    }
    let step = next(&seen(&restoring, old_vm, Some(&done)));
    assert!(
        matches!(&step, Step::Fail(why) if why.contains("the Machine's VM does not control it")),
        "{step:?}"
    );
    let new_vm = claims(&[
        (&r("root"), "uid-rr", false),
        (&r("data"), "uid-rd", false),
        ("web-root", "uid-root", true),
        ("web-data", "uid-data", true),
    ]);
    assert!(
        matches!(
            next(&seen(&restoring, new_vm, Some(&done))),
            Step::BeginAdopting(_)
        ),
        "proven by the new VM"
    );
}
