//! The order and the waits: the VM first, which VMI holds the rest, a Machine without its
//! cluster; and the fate of a disk.

use super::*;
use crate::api::names::MACHINE_LABEL;
use crate::reconciler::FINALIZER;

#[test]
fn the_vm_goes_first_and_the_rest_waits_for_its_vmi() {
    let vmi = |vm_uid: &str| ObjectMeta {
        owner_references: Some(vec![OwnerReference {
            kind: "VirtualMachine".into(),
            name: "m".into(),
            uid: vm_uid.into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]),
        ..ObjectMeta::default()
    };
    let mut o = remains(machine(&[FINALIZER], &[]));
    o.vm = Some(meta(Kind::VirtualMachine, "m", Proof::Made, true));
    o.vmi = Some(vmi("uid-m"));
    o.volumes.push(claim(Proof::Made, true));
    let plan = planned(&o, &key());
    assert_eq!(
        plan.actions,
        [deleted(Kind::VirtualMachine, "m", Reason::Ours)]
    );
    assert_eq!((plan.wait, plan.remove_finalizer), (Some(Wait::Vmi), false));

    // Going already: left to go; the VMI still holds.
    (o.vm.as_mut().expect("vm")).deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let plan = planned(&o, &key());
    assert_eq!(
        plan.actions,
        [left(Kind::VirtualMachine, "m", Reason::Going)]
    );
    assert_eq!(plan.wait, Some(Wait::Vmi));

    // Gone: a VMI its VM controlled still holds; one of another VM's does not.
    o.vm = None;
    assert_eq!(planned(&o, &key()).wait, Some(Wait::Vmi));
    o.vmi = Some(vmi("uid-other-vm"));
    o.vm = Some(meta(Kind::VirtualMachine, "m", Proof::Made, true));
    assert_eq!(planned(&o, &key()).wait, None);

    // A VM of that name that is not ours is left alone, and so is its VMI.
    o.vm = Some(meta(Kind::VirtualMachine, "m", Proof::None, true));
    o.vmi = Some(vmi("uid-m"));
    let plan = planned(&o, &key());
    assert_eq!(
        plan.actions[0],
        left(Kind::VirtualMachine, "m", Reason::NotOurs)
    );
    assert_eq!((plan.wait, plan.remove_finalizer), (None, true));
}

#[test]
fn without_its_cluster_a_machine_waits_and_says_how_to_abandon_unless_abandoned() {
    let hint = "no answer; its deletion waits for the cluster: to let it go without cleaning up there (what it made there stays), annotate it vitistack.io/abandon-remote=true";
    let abandon = [(ABANDON_REMOTE_ANNOTATION, "true")];
    let no = [(ABANDON_REMOTE_ANNOTATION, "false")];
    let waits = |message: Option<&str>| Plan {
        wait: Some(Wait::Cluster),
        cluster_message: message.map(str::to_owned),
        ..Plan::default()
    };
    let goes = Plan {
        remove_finalizer: true,
        ..Plan::default()
    };
    type Row<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)], bool, Plan);
    // (row, finalizers, annotations, probed, plan)
    let rows: [Row; 6] = [
        (
            "waits, says how",
            &[FINALIZER],
            &[],
            true,
            waits(Some(hint)),
        ),
        ("\"false\"", &[FINALIZER], &no, true, waits(Some(hint))),
        ("abandoned", &[FINALIZER], &abandon, true, goes),
        // A new leader's first seconds: the cluster is not known to be away.
        ("not yet probed", &[FINALIZER], &abandon, false, waits(None)),
        ("not probed, kept", &[FINALIZER], &[], false, waits(None)),
        ("no finalizer", &[], &abandon, true, Plan::default()),
    ];
    for (row, finalizers, annotations, probed, want) in rows {
        let mut o = remains(machine(finalizers, annotations));
        o.remote = true;
        o.away = Some(Away {
            probed,
            message: "no answer".into(),
        });
        assert_eq!(planned(&o, &key()), want, "{row}");
    }
}

#[test]
fn a_remote_vm_labelled_for_the_machine_but_unproven_holds_it_unless_abandoned() {
    let abandon = [(ABANDON_REMOTE_ANNOTATION, "true")];
    let labelled = |proof| {
        let mut vm = meta(Kind::VirtualMachine, "m", proof, false);
        let labels = vm.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(MACHINE_LABEL.into(), "m".into());
        vm
    };
    // (row, remote, abandoned, vm, wait, finalizer goes)
    let rows = [
        (
            "remote, unproven",
            true,
            false,
            Proof::None,
            Some(Wait::UnprovenVm),
            false,
        ),
        ("remote, abandoned", true, true, Proof::None, None, true),
        ("remote, proven", true, false, Proof::Made, None, true),
        // Locally, a VM of that name that is not ours is a conflict: left, the Machine goes.
        ("local, unproven", false, false, Proof::None, None, true),
    ];
    for (row, remote, abandoned, proof, wait, goes) in rows {
        let annotations: &[(&str, &str)] = if abandoned { &abandon } else { &[] };
        let mut o = remains(machine(&[FINALIZER], annotations));
        o.remote = remote;
        o.vm = Some(labelled(proof));
        o.volumes.push(claim(Proof::Made, false));
        let plan = planned(&o, &key());
        assert_eq!((plan.wait, plan.remove_finalizer), (wait, goes), "{row}");
        if matches!(proof, Proof::None) && remote {
            // Nothing else is touched: its disks may be what the VM mounts.
            let kept = left(Kind::VirtualMachine, "m", Reason::NotOurs);
            assert_eq!(plan.actions, [kept], "{row}");
        }
    }
    // A VM not labelled for it is a conflict, not a hold.
    let mut o = remains(machine(&[FINALIZER], &[]));
    o.remote = true;
    o.vm = Some(meta(Kind::VirtualMachine, "m", Proof::None, false));
    assert_eq!(planned(&o, &key()).wait, None);
}

#[test]
fn a_restore_holding_the_machine_holds_its_cleanup() {
    let mut o = remains(machine(&[FINALIZER], &[]));
    o.vm = Some(meta(Kind::VirtualMachine, "m", Proof::Made, true));
    o.restoring = Some("undo".into());
    let plan = planned(&o, &key());
    assert_eq!(plan.wait, Some(Wait::Restore));
    assert!(plan.actions.is_empty() && !plan.remove_finalizer);
}

#[test]
fn cleanup_keeps_disks_under_retain_or_orphan_and_those_no_longer_referenced() {
    use Fate::*;
    // (retain or orphan, disk, references the Machine, expected)
    let cases = [
        (true, true, true, Keep),
        (true, true, false, Keep),
        (false, true, true, Delete),
        // Orphaned by the garbage collector before the cleanup saw the orphan finalizer.
        (false, true, false, Keep),
        // A CD-ROM's DataVolume is installer media: it goes in every case.
        (true, false, true, Delete),
        (false, false, false, Delete),
    ];
    for (i, (retain, disk, references, want)) in cases.into_iter().enumerate() {
        assert_eq!(fate(retain, disk, references), want, "case {i}");
    }
}

#[test]
fn only_a_vmi_of_the_machines_vm_holds_its_deletion() {
    let vmi = |owner: Option<(&str, &str, &str)>| ObjectMeta {
        owner_references: owner.map(|(kind, name, uid)| {
            vec![OwnerReference {
                kind: kind.into(),
                name: name.into(),
                uid: uid.into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]
        }),
        ..ObjectMeta::default()
    };
    let ours = vmi(Some(("VirtualMachine", "m", "uid-vm")));
    assert!(held_by_vm(&ours, "m", Some("uid-vm")));
    // The VM is already gone: its VMI still holds until KubeVirt removes it.
    assert!(held_by_vm(&ours, "m", None));
    assert!(!held_by_vm(&ours, "m", Some("uid-other-vm")));
    assert!(!held_by_vm(&vmi(None), "m", None), "forged: no owner");
    assert!(!held_by_vm(&vmi(Some(("ReplicaSet", "m", "x"))), "m", None));
    assert!(!held_by_vm(
        &vmi(Some(("VirtualMachine", "n", "x"))),
        "m",
        None
    ));
}
