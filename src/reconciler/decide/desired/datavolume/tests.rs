//! DataVolumes and VM devices for sources and CD-ROMs; [`crds`] checks every example's against
//! CDI's and KubeVirt's real CRD schemas (`tests/fixtures/crds/`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::access::data_sources;
use crate::admission::schema::SchemaCheck;
use crate::api::Machine;
use crate::api::names::CLONE_SOURCES_ANNOTATION;
use crate::machine::{Catalog, resolve};
use crate::reconciler::decide::desired::{Desired, Inputs, derive};

const UID: &str = "0a1b2c3d-0000-4000-8000-000000000012";

fn machine(name: &str, spec: Value) -> Machine {
    let mut m = Machine::new(name, serde_json::from_value(spec).expect("spec"));
    m.metadata.namespace = Some("ns".into());
    m.metadata.uid = Some(UID.into());
    m
}

/// As the mutating webhook records them.
fn with_pins(mut m: Machine, pins: Value) -> Machine {
    m.metadata.annotations = Some(BTreeMap::from([(
        CLONE_SOURCES_ANNOTATION.to_owned(),
        pins.to_string(),
    )]));
    m
}

/// Every dataSource volume pinned to a PVC named after its DataSource, as admission would.
fn pin_all(m: Machine) -> Machine {
    let ns = m.metadata.namespace.clone().unwrap_or_default();
    let pins: serde_json::Map<String, Value> = data_sources::volumes(&m.spec)
        .map(|(volume, r)| {
            let namespace = r.namespace.clone().unwrap_or_else(|| ns.clone());
            let pin = json!({"pvc": {"namespace": namespace, "name": format!("{}-pvc", r.name)}});
            (volume.to_owned(), pin)
        })
        .collect();
    with_pins(m, Value::Object(pins))
}

fn derived(m: &Machine) -> Desired {
    // As observe hands it to decide: no StorageProfile, so the modes of before.
    let spec = crate::reconciler::decide::storage_defaults::fill(
        resolve(&m.spec, None, &Catalog::default()).spec,
        &Default::default(),
    );
    let scs = m
        .spec
        .disks
        .iter()
        .filter_map(|d| d.storage_class.clone())
        .collect::<BTreeSet<_>>();
    derive(&Inputs {
        machine: m,
        spec: &spec,
        network_configurations: &BTreeMap::new(),
        storage_classes: &scs,
        cloud_init_secret: None,
        network_policy: &Default::default(),
        eviction_strategy: crate::api::placement::DEFAULT_EVICTION_STRATEGY,
        label_prefixes: &[],
        copy_user_data: false,
        hardware: &Default::default(),
        pins: &crate::api::clone_sources::read(m.metadata.annotations.as_ref()).unwrap_or_default(),
    })
}

fn dvs(d: &Desired) -> Vec<Value> {
    d.data_volumes
        .iter()
        .map(|dv| serde_json::to_value(dv).unwrap())
        .collect()
}

fn vm_spec(d: &Desired) -> Value {
    serde_json::to_value(d.vm.as_ref().expect("a VM")).unwrap()["spec"]["template"]["spec"].clone()
}

#[test]
fn an_http_disk_becomes_a_data_volume_named_like_its_claim() {
    let m = machine(
        "debian",
        json!({"template": "small", "disks": [{"name": "root", "size": "20Gi", "storageClass": "fast",
        "source": {"http": {"url": "https://cloud.debian.org/d.qcow2", "secretRef": {"name": "creds"}, "certConfigMap": "ca"}}}]}),
    );
    let d = derived(&m);
    assert!(
        d.problems.is_empty() && d.pvcs.is_empty(),
        "no blank claim for a disk with a source"
    );
    assert_eq!(
        dvs(&d),
        [json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
            "metadata": {"name": "debian-root", "namespace": "ns",
                "labels": {"vitistack.io/machine": "debian", "vitistack.io/managed-by": "kubevirt-operator"},
                // CDI neither collects it after the import nor adopts a claim it did not make.
                "annotations": {"cdi.kubevirt.io/allowClaimAdoption": "false",
                                "cdi.kubevirt.io/storage.deleteAfterCompletion": "false"},
                "ownerReferences": [{"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine", "name": "debian", "uid": UID,
                                     "controller": true, "blockOwnerDeletion": true}]},
            "spec": {
                "source": {"http": {"url": "https://cloud.debian.org/d.qcow2", "secretRef": "creds", "certConfigMap": "ca"}},
                "storage": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}},
                            "storageClassName": "fast", "volumeMode": "Filesystem"}
            }
        })]
    );
    let spec = vm_spec(&d);
    assert_eq!(
        spec["volumes"],
        json!([{"name": "root", "dataVolume": {"name": "debian-root"}}])
    );
    assert_eq!(
        spec["domain"]["devices"]["disks"],
        json!([{"name": "root", "disk": {"bus": "virtio"}}])
    );
}

#[test]
fn a_registry_disk() {
    let m = machine(
        "f",
        json!({"disks": [{"name": "root", "size": "10Gi",
        "source": {"registry": {"url": "docker://quay.io/containerdisks/fedora:40", "secretRef": {"name": "pull"}, "pullMethod": "node"}}}]}),
    );
    assert_eq!(
        dvs(&derived(&m))[0]["spec"]["source"],
        json!({"registry": {"url": "docker://quay.io/containerdisks/fedora:40", "secretRef": "pull", "pullMethod": "node"}})
    );
}

#[test]
fn clones_default_to_the_machines_namespace_and_the_sources_size() {
    let m = with_pins(
        machine(
            "c",
            json!({"disks": [
            {"name": "root", "source": {"pvc": {"name": "golden"}}},
            {"name": "data", "size": "50Gi", "source": {"dataSource": {"name": "debian-12", "namespace": "os-images"}}},
            {"name": "scratch", "size": "1Gi"}]}),
        ),
        json!({"data": {"pvc": {"namespace": "os-images", "name": "debian-12-2026-11"}}}),
    );
    let d = derived(&m);
    let dvs = dvs(&d);
    assert_eq!(
        dvs[0]["spec"],
        json!({
            "source": {"pvc": {"name": "golden", "namespace": "ns"}},
            "storage": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}
        }),
        "no size: CDI takes the source's"
    );
    assert_eq!(
        dvs[1]["spec"],
        json!({
            "source": {"pvc": {"namespace": "os-images", "name": "debian-12-2026-11"}},
            "storage": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}, "volumeMode": "Filesystem"}
        })
    );
    assert_eq!(d.pvcs.len(), 1, "the blank disk stays a plain claim");
    assert_eq!(d.pvcs[0].metadata.name.as_deref(), Some("c-scratch"));
    assert_eq!(
        vm_spec(&d)["volumes"],
        json!([{"name": "root", "dataVolume": {"name": "c-root"}},
               {"name": "data", "dataVolume": {"name": "c-data"}},
               {"name": "scratch", "persistentVolumeClaim": {"claimName": "c-scratch"}}])
    );
}

#[test]
fn a_data_source_clones_what_admission_pinned_and_without_a_pin_nothing() {
    let spec = json!({"disks": [
        {"name": "root", "source": {"dataSource": {"name": "debian-12"}}},
        {"name": "data", "source": {"pvc": {"name": "golden-debian-12", "namespace": "os-images"}}}]});
    // Pinned to a snapshot: CDI's snapshot source, never a sourceRef CDI would follow later.
    let m = with_pins(
        machine("c", spec.clone()),
        json!({"root": {"snapshot": {"namespace": "os-images", "name": "debian-12-snap"}}}),
    );
    let made = dvs(&derived(&m));
    assert_eq!(
        made[0]["spec"]["source"],
        json!({"snapshot": {"namespace": "os-images", "name": "debian-12-snap"}})
    );
    assert!(made[0]["spec"].get("sourceRef").is_none(), "{:#}", made[0]);
    assert_eq!(
        made[1]["spec"]["source"],
        json!({"pvc": {"name": "golden-debian-12", "namespace": "os-images"}})
    );
    // Unpinned (stored before pinning, or past the webhook), or pins that do not parse: no
    // source at all (decide keeps a made DataVolume's, and makes none: `CloneSourceNotPinned`).
    for m in [
        machine("c", spec.clone()),
        with_pins(machine("c", spec), json!("garbled")),
    ] {
        let made = dvs(&derived(&m));
        assert_eq!(made.len(), 2);
        assert!(made[0]["spec"].get("source").is_none(), "{:#}", made[0]);
        assert!(made[0]["spec"].get("sourceRef").is_none(), "{:#}", made[0]);
    }
}

#[test]
fn cdroms_are_read_only_sata_drives_and_boot_where_the_order_says() {
    let m = pin_all(machine(
        "inst",
        json!({"template": "small",
        "cdroms": [{"name": "installer", "source": {"http": {"url": "https://a/netinst.iso"}}},
                   {"name": "drivers", "size": "1Gi", "source": {"pvc": {"name": "virtio-win"}}},
                   {"name": "tools", "source": {"dataSource": {"name": "tools"}}}],
        "bootOrder": ["cdrom", "disk", "network"]}),
    ));
    let d = derived(&m);
    let dvs = dvs(&d);
    assert_eq!(dvs.len(), 3);
    assert_eq!(dvs[0]["metadata"]["name"], "inst-installer");
    assert_eq!(
        dvs[0]["spec"]["storage"],
        json!({"resources": {"requests": {"storage": "10Gi"}}}),
        "an imported CD-ROM without a size gets 10Gi; modes come from CDI's StorageProfile"
    );
    assert_eq!(
        dvs[1]["spec"]["storage"],
        json!({"resources": {"requests": {"storage": "1Gi"}}})
    );
    assert_eq!(
        dvs[2]["spec"]["storage"],
        json!({}),
        "a cloned CD-ROM takes its source's size"
    );
    let spec = vm_spec(&d);
    assert_eq!(
        spec["domain"]["devices"]["disks"],
        json!([
            {"name": "root", "disk": {"bus": "virtio"}, "bootOrder": 4},
            {"name": "installer", "cdrom": {"bus": "sata", "readonly": true}, "bootOrder": 1},
            {"name": "drivers", "cdrom": {"bus": "sata", "readonly": true}, "bootOrder": 2},
            {"name": "tools", "cdrom": {"bus": "sata", "readonly": true}, "bootOrder": 3},
        ])
    );
    assert_eq!(spec["domain"]["devices"]["interfaces"][0]["bootOrder"], 5);
    assert_eq!(
        spec["volumes"][1],
        json!({"name": "installer", "dataVolume": {"name": "inst-installer"}})
    );
    assert_eq!(d.pvcs.len(), 1, "the root disk stays blank");
}

#[test]
fn without_cdrom_in_the_boot_order_cdroms_get_no_number() {
    let m = machine(
        "i",
        json!({"cdroms": [{"name": "iso", "source": {"pvc": {"name": "p"}}}], "bootOrder": ["disk"]}),
    );
    let disks = vm_spec(&derived(&m))["domain"]["devices"]["disks"].clone();
    assert_eq!(disks[0]["bootOrder"], 1);
    assert!(disks[1].get("bootOrder").is_none());
}

#[test]
fn a_missing_storage_class_holds_back_the_data_volume_too() {
    let m = machine(
        "m",
        json!({"disks": [{"name": "d", "size": "1Gi", "storageClass": "gold", "source": {"pvc": {"name": "p"}}}]}),
    );
    // As observe hands it to decide: no StorageProfile, so the modes of before.
    let spec = crate::reconciler::decide::storage_defaults::fill(
        resolve(&m.spec, None, &Catalog::default()).spec,
        &Default::default(),
    );
    let d = derive(&Inputs {
        machine: &m,
        spec: &spec,
        network_configurations: &BTreeMap::new(),
        storage_classes: &BTreeSet::new(),
        cloud_init_secret: None,
        network_policy: &Default::default(),
        eviction_strategy: crate::api::placement::DEFAULT_EVICTION_STRATEGY,
        label_prefixes: &[],
        copy_user_data: false,
        hardware: &Default::default(),
        pins: &crate::api::clone_sources::read(m.metadata.annotations.as_ref()).unwrap_or_default(),
    });
    assert!(d.data_volumes.is_empty() && d.vm.is_none() && d.problems.len() == 1);
}

mod crds;
