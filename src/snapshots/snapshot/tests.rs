//! The proof that the operator took a MachineSnapshot of a Machine: bound to the snapshot's
//! name and uid and the Machine's name and uid, found only on the VirtualMachineSnapshot the
//! snapshot controls (or in a scheduled snapshot's made-for proof).

use serde_json::json;

use super::*;
use crate::api::names::PROOF_ANNOTATION;

fn key() -> OwnershipKey {
    OwnershipKey::new(&[7; 32], None).expect("key")
}

fn msnap(name: &str, uid: &str, annotations: serde_json::Value) -> MachineSnapshot {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "annotations": annotations},
        "spec": {"machineName": "web"}
    }))
    .expect("snapshot")
}

fn vms(controller: &str, proof: &str) -> VirtualMachineSnapshot {
    serde_json::from_value(json!({
        "apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshot",
        "metadata": {"name": "web-before", "namespace": "ns",
            "annotations": {TAKEN_OF_ANNOTATION: proof, MACHINE_UID_ANNOTATION: "uid-old"},
            "ownerReferences": [{"apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
                "name": "web-before", "uid": controller, "controller": true}]},
        "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "web"}}
    }))
    .expect("vm snapshot")
}

#[test]
fn only_the_operators_proof_on_the_snapshot_it_made_says_what_it_was_taken_of() {
    let k = key();
    let s = msnap("web-before", "uid-s", json!({}));
    let proof = taken_proof(&k, &s, "uid-old");
    assert_eq!(
        taken_of(&k, &s, Some(&vms("uid-s", &proof))).as_deref(),
        Some("uid-old")
    );
    // A MachineSnapshot of the same name made again (another uid), the old proof copied onto
    // a VirtualMachineSnapshot it controls.
    let again = msnap("web-before", "uid-s2", json!({}));
    assert_eq!(taken_of(&k, &again, Some(&vms("uid-s2", &proof))), None);
    // Not controlled by the snapshot, another key's proof, a uid swapped, no proof, none.
    assert_eq!(taken_of(&k, &s, Some(&vms("uid-x", &proof))), None);
    let other = OwnershipKey::new(&[8; 32], None).expect("key");
    let theirs = taken_proof(&other, &s, "uid-old");
    assert_eq!(taken_of(&k, &s, Some(&vms("uid-s", &theirs))), None);
    let swapped = proof.replacen("uid-old", "uid-new", 1);
    assert_eq!(taken_of(&k, &s, Some(&vms("uid-s", &swapped))), None);
    assert_eq!(taken_of(&k, &s, Some(&vms("uid-s", ""))), None);
    assert_eq!(taken_of(&k, &s, None), None);
    // A scheduled snapshot's made-for proof says it too.
    let target = Target {
        kind: crate::snapshots::scheduler::KIND,
        namespace: "ns",
        name: "web-202601010200",
    };
    let made_for = k.proof(&target, "web", "uid-old");
    let scheduled = msnap(
        "web-202601010200",
        "uid-s3",
        json!({PROOF_ANNOTATION: made_for}),
    );
    assert_eq!(taken_of(&k, &scheduled, None).as_deref(), Some("uid-old"));
}
