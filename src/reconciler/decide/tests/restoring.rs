//! A MachineRestore in a holding step: the reconciler writes nothing of the VM or the disks.

use super::*;

#[test]
fn a_running_restore_holds_vm_and_disk_writes() {
    let mut o = observed(machine(
        "m",
        json!({"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}),
    ));
    let free = decide(&o, &Catalog::default(), &key());
    assert!(!free.claims.is_empty() && free.vm.is_some(), "{free:?}");
    o.restoring = Some(("undo".into(), "Restoring".into()));
    let held = decide(&o, &Catalog::default(), &key());
    assert!(held.claims.is_empty(), "{:?}", held.claims);
    assert!(held.vm.is_none(), "the VM is left as the restore has it");
    assert!(held.data_volumes.is_empty() && held.grow_claims.is_empty());
    assert!(held.release.is_empty() && held.delete_removed.is_empty());
    assert_eq!(held.restart, restart::Restart::default());
}

#[test]
fn a_restore_keeps_the_restarts_recorded_and_acts_on_none() {
    let mut o = observed(machine("m", json!({"template": "small"})));
    o.machine.metadata.annotations = Some(
        [(
            crate::api::names::RESTARTED_AT_ANNOTATION.to_owned(),
            "2026-11-25T10:00:00Z".to_owned(),
        )]
        .into(),
    );
    o.machine.status = Some(crate::api::MachineStatus {
        last_restart: Some("2026-11-01T00:00:00Z".into()),
        last_restart_generation: Some(3),
        ..Default::default()
    });
    o.restoring = Some(("undo".into(), "Stopping".into()));
    let held = decide(&o, &Catalog::default(), &key());
    // The new value stays unacted on (recorded only once a restart can happen), and the
    // generation restarted for stays.
    assert_eq!(
        held.restart,
        restart::Restart {
            delete_vmi: None,
            last_restart: Some("2026-11-01T00:00:00Z".into()),
            last_restart_generation: Some(3),
        }
    );
}
