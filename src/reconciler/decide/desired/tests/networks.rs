//! Networks: Multus attachments from NetworkConfigurations, and what holds back the VM.

use super::*;

#[test]
fn seed_networking() {
    let m = machine(
        "networked-vm",
        json!({"template": "medium", "networks": [
            {"name": "eth0", "networkName": "prod-network", "model": "virtio"},
            {"name": "eth1", "networkName": "storage-network", "model": "e1000", "macAddress": "52:54:00:12:34:56"}
        ]}),
    );
    let world = World::empty()
        .with_nc(nc("prod-network", Some("br0"), Some(100)))
        .with_nc(nc("storage-network", Some("br1"), Some(0)));
    let d = derive_with(&m, &world, None);
    assert!(d.problems.is_empty());
    let dom = domain(&d);
    assert_eq!(
        dom["devices"]["interfaces"],
        json!([
            {"name": "eth0", "bridge": {}, "model": "virtio"},
            {"name": "eth1", "bridge": {}, "model": "e1000", "macAddress": "52:54:00:12:34:56"}
        ])
    );
    assert_eq!(
        vm_json(&d)["spec"]["template"]["spec"]["networks"],
        json!([
            {"name": "eth0", "multus": {"networkName": "prod-network"}},
            {"name": "eth1", "multus": {"networkName": "storage-network"}}
        ])
    );
    assert_eq!(d.attachments.len(), 2);
    let prod = serde_json::to_value(&d.attachments[0]).unwrap();
    assert_eq!(prod["apiVersion"], "k8s.cni.cncf.io/v1");
    assert_eq!(prod["metadata"]["name"], "prod-network");
    assert_eq!(
        prod["metadata"]["ownerReferences"],
        json!([{"apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration", "name": "prod-network",
                "uid": "nc-prod-network", "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(
        prod["metadata"]["labels"],
        json!({"vitistack.io/managed-by": "kubevirt-operator", "vitistack.io/network-configuration": "prod-network"})
    );
    let config: Value = serde_json::from_str(prod["spec"]["config"].as_str().unwrap()).unwrap();
    assert_eq!(
        config,
        json!({"cniVersion": "0.3.1", "name": "prod-network", "type": "bridge", "bridge": "br0", "vlan": 100, "ipam": {}})
    );
    let storage = &d.attachments[1].spec.config;
    assert!(
        !storage.as_ref().unwrap().contains("vlan"),
        "VLAN 0 is untagged"
    );
}

#[test]
fn a_missing_network_configuration_holds_back_the_vm() {
    let m = machine(
        "m",
        json!({"networks": [{"name": "eth0", "networkName": "prod"}, {"name": "eth1", "networkName": "lab"}]}),
    );
    let d = derive_with(
        &m,
        &World::empty().with_nc(nc("lab", Some("br9"), None)),
        None,
    );
    assert_eq!(
        d.problems,
        [Problem::NetworkConfigurationNotFound {
            network: "eth0".into(),
            network_name: "prod".into()
        }]
    );
    assert!(d.vm.is_none());
    assert_eq!(d.attachments.len(), 1, "the existing one is still kept");
}

#[test]
fn a_network_configuration_without_bridge_is_a_network_failure() {
    let m = machine(
        "m",
        json!({"networks": [{"name": "eth0", "networkName": "prod"}]}),
    );
    let d = derive_with(&m, &World::empty().with_nc(nc("prod", None, Some(5))), None);
    assert!(
        matches!(&d.problems[..], [Problem::NetworkInvalid { network_name, .. }] if network_name == "prod")
    );
    let d = derive_with(
        &m,
        &World::empty().with_nc(nc("prod", Some("br0"), Some(5000))),
        None,
    );
    assert!(
        matches!(&d.problems[..], [Problem::NetworkInvalid { message, .. }] if message.contains("5000"))
    );
}

/// Issue 25: a NetworkConfiguration stored while no webhook ran kept any bridge and VLAN; the
/// reconciler wrote its attachment all the same.
#[test]
fn a_network_outside_the_allow_lists_becomes_no_attachment() {
    let m = machine(
        "m",
        json!({"networks": [{"name": "eth0", "networkName": "mgmt"}]}),
    );
    let world = World::empty().with_nc(nc("mgmt", Some("cni0"), Some(7)));
    let spec = resolve(&m.spec, None, &Catalog::default()).spec;
    let policy = NetworkPolicy::new(["br0".to_owned()], Vlans::parse("100-199").expect("vlans"));
    let d = derive(&Inputs {
        machine: &m,
        spec: &spec,
        network_configurations: &world.ncs,
        storage_classes: &world.scs,
        source_secret: None,
        network_policy: &policy,
        eviction_strategy: crate::api::placement::DEFAULT_EVICTION_STRATEGY,
        label_prefixes: &[],
        copy_user_data: false,
        hardware: &Default::default(),
        pins: &crate::api::clone_sources::read(m.metadata.annotations.as_ref()).unwrap_or_default(),
    });
    assert!(d.attachments.is_empty() && d.vm.is_none());
    assert_eq!(
        d.problems,
        [Problem::NetworkInvalid {
            network_name: "mgmt".into(),
            message: r#"NetworkConfiguration "mgmt" is refused: [spec.bridge: Unsupported value: "cni0": the operator's --allowed-bridges (ALLOWED_BRIDGES) allows br0, spec.vlan: Unsupported value: 7: the operator's --allowed-vlans (ALLOWED_VLANS) allows 100-199 (0: untagged)]"#.into(),
        }]
    );
}

#[test]
fn two_interfaces_on_one_network_share_one_attachment() {
    let m = machine(
        "m",
        json!({"networks": [{"name": "a", "networkName": "prod"}, {"name": "b", "networkName": "prod"}]}),
    );
    let d = derive_with(
        &m,
        &World::empty().with_nc(nc("prod", Some("br0"), None)),
        None,
    );
    assert_eq!(d.attachments.len(), 1);
    assert_eq!(
        domain(&d)["devices"]["interfaces"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
