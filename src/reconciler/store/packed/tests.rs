use super::*;
use kube::ResourceExt;
use serde_json::json;

fn claim() -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "m-root", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
            "deletionTimestamp": "2026-11-23T10:00:00Z", "creationTimestamp": "2026-11-23T09:00:00Z",
            "labels": {"app.kubernetes.io/managed-by": "kubevirt-operator"},
            "ownerReferences": [{"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                "name": "m", "uid": "mu", "controller": true}]
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": "Bound"}
    }))
    .unwrap()
}

#[test]
fn unpacks_to_the_object_packed() {
    let c = claim();
    let p = Packed::pack(&c).unwrap();
    assert_eq!(p.unpack().unwrap(), c);
}

#[test]
fn damaged_bytes_are_an_error_not_a_panic() {
    assert!(Packed::pack(&claim()).unwrap().damaged().unpack().is_err());
}

#[test]
fn keeps_what_stores_and_owner_triggers_read() {
    let p = Packed::pack(&claim()).unwrap();
    assert_eq!(p.name_any(), "m-root");
    assert_eq!(p.namespace().as_deref(), Some("ns"));
    assert_eq!(p.uid().as_deref(), Some("u1"));
    assert_eq!(p.resource_version().as_deref(), Some("7"));
    assert_eq!(p.owner_references()[0].uid, "mu");
    assert!(p.labels().is_empty(), "labels stay packed");
    assert_eq!(
        Packed::<PersistentVolumeClaim>::kind(&()),
        "PersistentVolumeClaim"
    );
    assert_eq!(
        Packed::<PersistentVolumeClaim>::plural(&()),
        "persistentvolumeclaims"
    );
    assert_eq!(Packed::<VirtualMachine>::api_version(&()), "kubevirt.io/v1");
}

#[test]
fn deserialises_through_the_typed_object() {
    let p: Packed<PersistentVolumeClaim> =
        serde_json::from_value(serde_json::to_value(claim()).unwrap()).unwrap();
    assert_eq!(p.unpack().unwrap(), claim());
    let bad = serde_json::from_value::<Packed<PersistentVolumeClaim>>(json!({"spec": 3}));
    assert!(bad.is_err(), "a shape K refuses is refused");
}

#[test]
fn briefs_carry_phase_template_and_printable_status() {
    let m: Machine = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"template": "medium",
            "disks": [{"name": "root", "size": "10Gi", "storageClass": "fast"}, {"name": "data", "size": "1Gi"}],
            "networks": [{"name": "eth0", "networkName": "prod"}]},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let p = Packed::pack(&m).unwrap();
    assert_eq!(p.brief().phase.as_deref(), Some("Running"));
    assert_eq!(p.brief().template.as_deref(), Some("medium"));
    assert_eq!(&*p.brief().networks, [Box::from("prod")]);
    assert_eq!(&*p.brief().storage_classes, [Box::from("fast")]);
    let vm: VirtualMachine = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"template": {"spec": {"domain": {"devices": {}}}}},
        "status": {"printableStatus": "Stopped"}
    }))
    .unwrap();
    assert_eq!(
        Packed::pack(&vm).unwrap().brief().as_deref(),
        Some("Stopped")
    );
}

/// The trigger maps a DataVolume or VMI to its Machine by this brief, not by an owner.
#[test]
fn data_volume_and_vmi_briefs_are_the_machine_label() {
    use crate::reconciler::apis::cdi::DataVolumeSpec;
    use crate::reconciler::apis::kubevirt::VirtualMachineInstanceSpec;
    let labels = |machine: Option<&str>| {
        let mut l = std::collections::BTreeMap::from([(
            "vitistack.io/managed-by".to_owned(),
            "kubevirt-operator".to_owned(),
        )]);
        l.extend(machine.map(|m| ("vitistack.io/machine".to_owned(), m.to_owned())));
        l
    };
    for machine in [Some("m"), None] {
        let mut dv = DataVolume::new("m-root", DataVolumeSpec::default());
        *dv.labels_mut() = labels(machine);
        assert_eq!(Packed::pack(&dv).unwrap().brief().as_deref(), machine);
        let mut vmi = VirtualMachineInstance::new("m", VirtualMachineInstanceSpec::default());
        *vmi.labels_mut() = labels(machine);
        assert_eq!(
            Packed::pack(&vmi).unwrap().brief().machine.as_deref(),
            machine
        );
    }
}
