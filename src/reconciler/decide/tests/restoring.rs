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
    assert!(held.release.is_empty() && held.delete_data_volumes.is_empty());
    assert_eq!(held.restart, restart::Restart::default());
}
