use serde_json::{Value, json};

use super::*;

fn snap(status: Value) -> MachineSnapshot {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": "web-nightly", "uid": "snap-uid"},
        "spec": {"machineName": "web"}, "status": status
    }))
    .expect("snapshot")
}

fn good() -> Value {
    json!({"phase": "Succeeded", "readyToUse": true, "virtualMachineSnapshotName": "web-nightly",
           "machineUid": "web-uid"})
}

#[test]
fn only_a_ready_snapshot_of_this_cluster_is_cloned() {
    assert_eq!(usable(&snap(good())), Ok("web-nightly"));
    let mut pending = good();
    pending["phase"] = json!("InProgress");
    pending["readyToUse"] = json!(false);
    assert_eq!(
        usable(&snap(pending)),
        Err("MachineSnapshot web-nightly is not ready to use (phase InProgress): clone it once it has Succeeded".to_owned())
    );
    let mut remote = good();
    remote["cluster"] = json!("dc2");
    assert!(
        usable(&snap(remote)).expect_err("remote").starts_with(
            "MachineSnapshot web-nightly was taken on the cluster of KubevirtConfig dc2"
        )
    );
    assert!(usable(&snap(json!({}))).is_err());
}

#[test]
fn the_machine_must_be_the_one_it_was_taken_of() {
    let machine = |uid: &str| -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": "web", "uid": uid}, "spec": {}
        }))
        .expect("machine")
    };
    let s = snap(good());
    let web = machine("web-uid");
    let uid = |r: Result<&Machine, String>| r.map(|m| m.metadata.uid.clone());
    assert_eq!(
        uid(taken_of(&s, Some(&web))),
        Ok(Some("web-uid".to_owned()))
    );
    assert!(
        taken_of(&s, Some(&machine("later")))
            .expect_err("later")
            .contains("is of an earlier Machine named web")
    );
    assert!(
        taken_of(&s, None)
            .expect_err("gone")
            .contains("which no longer exists")
    );
}

#[test]
fn the_copies_are_those_of_the_content_it_controls() {
    let s = snap(good());
    let vm_snapshot = |owner: &str, content: Option<&str>| -> VirtualMachineSnapshot {
        serde_json::from_value(json!({
            "apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshot",
            "metadata": {"name": "web-nightly", "ownerReferences": [{"apiVersion": "vitistack.io/v1alpha1",
                "kind": "MachineSnapshot", "name": "web-nightly", "uid": owner, "controller": true}]},
            "spec": {"source": {"kind": "VirtualMachine", "name": "web"}},
            "status": {"virtualMachineSnapshotContentName": content}
        }))
        .expect("vm snapshot")
    };
    let ours = vm_snapshot("snap-uid", Some("vmsnapshot-content-1"));
    assert_eq!(content_name(&s, Some(&ours)), Ok("vmsnapshot-content-1"));
    assert!(content_name(&s, Some(&vm_snapshot("someone-else", Some("c")))).is_err());
    assert!(content_name(&s, Some(&vm_snapshot("snap-uid", None))).is_err());
    assert!(content_name(&s, None).is_err());

    let content = |of: &str| -> VirtualMachineSnapshotContent {
        serde_json::from_value(json!({
            "apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshotContent",
            "metadata": {"name": "vmsnapshot-content-1"},
            "spec": {"virtualMachineSnapshotName": of, "volumeBackups": [
                {"volumeName": "root", "volumeSnapshotName": "vmsnapshot-1-volume-root"},
                {"volumeName": "data", "volumeSnapshotName": ""}]}
        }))
        .expect("content")
    };
    assert_eq!(
        volumes("web-nightly", Some(&content("web-nightly"))),
        Ok(BTreeMap::from([(
            "root".to_owned(),
            "vmsnapshot-1-volume-root".to_owned()
        )]))
    );
    assert!(volumes("web-nightly", Some(&content("other"))).is_err());
    assert!(volumes("web-nightly", None).is_err());
}
