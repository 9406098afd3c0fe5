//! The order and the waits: the VM first, which VMI holds the rest, a Machine without its
//! cluster; and the fate of a disk.

use super::*;
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
fn without_its_cluster_a_machine_waits_unless_abandoned() {
    let abandon = [(ABANDON_REMOTE_ANNOTATION, "true")];
    let waits = Plan {
        wait: Some(Wait::Cluster),
        ..Plan::default()
    };
    assert_eq!(without_cluster(&machine(&[FINALIZER], &[])), waits);
    let no = [(ABANDON_REMOTE_ANNOTATION, "yes")];
    assert_eq!(without_cluster(&machine(&[FINALIZER], &no)), waits);
    let goes = without_cluster(&machine(&[FINALIZER], &abandon));
    assert_eq!((goes.wait, goes.remove_finalizer), (None, true));
    let gone = without_cluster(&machine(&[], &abandon));
    assert_eq!((gone.wait, gone.remove_finalizer), (None, false));
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
