//! The mapping from Machine fields to KubeVirt, PVC and Multus fields (SPEC "Reconciler").

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::ByteString;
use serde_json::{Value, json};

use super::*;
use crate::api::NetworkConfigurationSpec;
use crate::machine::network_policy::Vlans;
use crate::machine::{Catalog, resolve};

pub(super) const UID: &str = "0a1b2c3d-0000-4000-8000-000000000001";

pub(super) fn machine(name: &str, spec: Value) -> Machine {
    let mut m = Machine::new(name, serde_json::from_value(spec).expect("spec"));
    m.metadata.namespace = Some("ns".into());
    m.metadata.uid = Some(UID.into());
    m
}

pub(super) fn nc(name: &str, bridge: Option<&str>, vlan: Option<i64>) -> NetworkConfiguration {
    let mut n = NetworkConfiguration::new(
        name,
        NetworkConfigurationSpec {
            vlan,
            bridge: bridge.map(str::to_owned),
            ipam: None,
        },
    );
    n.metadata.namespace = Some("ns".into());
    n.metadata.uid = Some(format!("nc-{name}"));
    n
}

pub(super) struct World {
    pub(super) ncs: BTreeMap<String, NetworkConfiguration>,
    pub(super) scs: BTreeSet<String>,
}

impl World {
    pub(super) fn empty() -> Self {
        World {
            ncs: BTreeMap::new(),
            scs: BTreeSet::new(),
        }
    }
    pub(super) fn with_nc(mut self, n: NetworkConfiguration) -> Self {
        self.ncs.insert(n.metadata.name.clone().unwrap(), n);
        self
    }
    pub(super) fn with_sc(mut self, sc: &str) -> Self {
        self.scs.insert(sc.into());
        self
    }
}

/// Every bridge these tests use, and every VLAN.
pub(super) fn test_networks() -> NetworkPolicy {
    let bridges = ["br0", "br1", "br9", "br-prod", "br-storage"].map(str::to_owned);
    NetworkPolicy::new(bridges, Vlans::parse("0-4094").expect("vlans"))
}

pub(super) fn derive_with(m: &Machine, world: &World, secret: Option<SecretData>) -> Desired {
    derive_on(m, world, secret, false)
}

/// [`derive_with`], for a VM on a remote cluster when `remote`.
pub(super) fn derive_on(
    m: &Machine,
    world: &World,
    secret: Option<SecretData>,
    remote: bool,
) -> Desired {
    let spec = resolve(&m.spec, None, &Catalog::default()).spec;
    // The user's Secret as observe would have read it: holding `secret` under the spec's key.
    let key = cloud_init::secret_source(spec.cloud_init.as_ref()).map(|(_, key)| key);
    let source = match secret {
        None | Some(SecretData::Missing) => None,
        Some(SecretData::KeyMissing) => Some(Secret::default()),
        Some(SecretData::Present(bytes)) => Some(Secret {
            data: Some(BTreeMap::from([(
                key.unwrap_or_default().to_owned(),
                ByteString(bytes.to_vec()),
            )])),
            ..Secret::default()
        }),
    };
    derive(&Inputs {
        machine: m,
        spec: &spec,
        network_configurations: &world.ncs,
        storage_classes: &world.scs,
        source_secret: source.as_ref(),
        network_policy: &test_networks(),
        eviction_strategy: crate::api::placement::DEFAULT_EVICTION_STRATEGY,
        label_prefixes: &[],
        copy_user_data: remote,
        hardware: &Default::default(),
        pins: &crate::api::clone_sources::read(m.metadata.annotations.as_ref()).unwrap_or_default(),
    })
}

pub(super) fn vm_json(d: &Desired) -> Value {
    serde_json::to_value(d.vm.as_ref().expect("a VM")).unwrap()
}

pub(super) fn domain(d: &Desired) -> Value {
    vm_json(d)["spec"]["template"]["spec"]["domain"].clone()
}

mod cloud_init_and_domain;
mod networks;
#[test]
fn seed_basic_vm() {
    let m = machine("basic-vm", json!({"template": "medium"}));
    let d = derive_with(&m, &World::empty(), None);
    assert!(d.problems.is_empty());
    assert_eq!(d.pvcs.len(), 1);
    let pvc = serde_json::to_value(&d.pvcs[0]).unwrap();
    assert_eq!(pvc["metadata"]["name"], "basic-vm-root");
    assert_eq!(
        pvc["spec"],
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "40Gi"}}, "volumeMode": "Filesystem"}),
        "no storageClassName: the cluster default applies"
    );
    let vm = vm_json(&d);
    assert_eq!(vm["apiVersion"], "kubevirt.io/v1");
    assert_eq!(vm["kind"], "VirtualMachine");
    assert_eq!(vm["metadata"]["name"], "basic-vm");
    assert_eq!(vm["metadata"]["namespace"], "ns");
    assert_eq!(vm["spec"]["runStrategy"], "Always");
    assert!(vm["spec"].get("running").is_none());
    let t = &vm["spec"]["template"];
    assert_eq!(
        t["metadata"]["labels"],
        json!({"vitistack.io/machine": "basic-vm", "vitistack.io/managed-by": "kubevirt-operator"})
    );
    assert_eq!(
        t["spec"]["domain"],
        json!({
            "cpu": {"cores": 2, "threads": 1, "sockets": 1},
            "memory": {"guest": "4Gi"},
            "machine": {"type": "q35"},
            "devices": {
                "disks": [{"name": "root", "disk": {"bus": "virtio"}}],
                "interfaces": [{"name": "default", "masquerade": {}}]
            }
        })
    );
    assert_eq!(
        t["spec"]["networks"],
        json!([{"name": "default", "pod": {}}])
    );
    assert_eq!(
        t["spec"]["volumes"],
        json!([{"name": "root", "persistentVolumeClaim": {"claimName": "basic-vm-root"}}])
    );
    assert!(d.attachments.is_empty() && d.secret.is_none());
}

#[test]
fn everything_made_is_labelled_and_owned_by_the_machine() {
    let m = machine(
        "m1",
        json!({"cloudInit": {"secretRef": {"name": "s", "key": "cfg"}}}),
    );
    let d = derive_with(
        &m,
        &World::empty(),
        Some(SecretData::Present(b"#cloud-config")),
    );
    let labels =
        json!({"vitistack.io/machine": "m1", "vitistack.io/managed-by": "kubevirt-operator"});
    let owner = json!([{
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine", "name": "m1", "uid": UID,
        "controller": true, "blockOwnerDeletion": true
    }]);
    let metas = [
        serde_json::to_value(&d.pvcs[0]).unwrap()["metadata"].clone(),
        vm_json(&d)["metadata"].clone(),
        serde_json::to_value(d.secret.as_ref().unwrap()).unwrap()["metadata"].clone(),
    ];
    for meta in metas {
        assert_eq!(meta["labels"], labels);
        assert_eq!(meta["ownerReferences"], owner);
        assert_eq!(meta["namespace"], "ns");
    }
}

#[test]
fn without_a_uid_no_owner_reference_is_invented() {
    let mut m = machine("m1", json!({}));
    m.metadata.uid = None;
    let d = derive_with(&m, &World::empty(), None);
    assert!(d.vm.unwrap().metadata.owner_references.is_none());
}

#[test]
fn seed_overrides_with_a_storage_class_that_exists() {
    let m = machine(
        "custom-vm",
        json!({"template": "small", "resources": {"cpu": {"cores": 4}, "memory": {"size": "8Gi"}},
               "disks": [{"name": "data", "size": "100Gi", "storageClass": "fast-ssd"}]}),
    );
    let d = derive_with(&m, &World::empty().with_sc("fast-ssd"), None);
    assert!(d.problems.is_empty());
    let names: Vec<_> = d
        .pvcs
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["custom-vm-root", "custom-vm-data"]);
    let data = d.pvcs[1].spec.as_ref().unwrap();
    assert_eq!(data.storage_class_name.as_deref(), Some("fast-ssd"));
    assert_eq!(
        data.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0,
        "100Gi"
    );
    let dom = domain(&d);
    assert_eq!(dom["cpu"], json!({"cores": 4, "threads": 1, "sockets": 1}));
    assert_eq!(dom["memory"]["guest"], "8Gi");
    assert_eq!(
        dom["devices"]["disks"],
        json!([{"name": "root", "disk": {"bus": "virtio"}}, {"name": "data", "disk": {"bus": "virtio"}}])
    );
}

#[test]
fn a_missing_storage_class_holds_back_that_claim_and_the_vm() {
    let m = machine(
        "m",
        json!({"disks": [{"name": "data", "size": "1Gi", "storageClass": "gold"}]}),
    );
    let d = derive_with(&m, &World::empty(), None);
    assert_eq!(
        d.problems,
        [Problem::StorageClassNotFound {
            disk: "data".into(),
            storage_class: "gold".into()
        }]
    );
    assert_eq!(
        d.pvcs.len(),
        1,
        "the root disk uses the default class and is made"
    );
    assert!(d.vm.is_none());
}

#[test]
fn access_and_volume_modes_are_passed_through() {
    let m = machine(
        "m",
        json!({"disks": [{"name": "root", "accessMode": "ReadWriteMany", "volumeMode": "Block"}]}),
    );
    let d = derive_with(&m, &World::empty(), None);
    let spec = d.pvcs[0].spec.as_ref().unwrap();
    assert_eq!(
        spec.access_modes.as_deref(),
        Some(&["ReadWriteMany".to_owned()][..])
    );
    assert_eq!(spec.volume_mode.as_deref(), Some("Block"));
}
