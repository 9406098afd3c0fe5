//! Cloud-init, machine types, features, firmware, boot order and run strategy.

use serde_json::json;

use super::*;

#[test]
fn seed_cloud_init_inline() {
    let user_data = "#cloud-config\nusers:\n  - name: admin\n";
    let m = machine(
        "cloud-init-vm",
        json!({"template": "large", "cloudInit": {"userData": user_data, "networkData": "version: 2\n"}}),
    );
    let d = derive_with(&m, &World::empty(), None);
    let t = &vm_json(&d)["spec"]["template"]["spec"];
    assert_eq!(
        t["volumes"][1],
        json!({"name": "cloudinitdisk", "cloudInitNoCloud": {"userData": user_data, "networkData": "version: 2\n"}})
    );
    assert_eq!(
        t["domain"]["devices"]["disks"][1],
        json!({"name": "cloudinitdisk", "disk": {"bus": "virtio"}})
    );
    assert_eq!(t["domain"]["cpu"]["cores"], 4);
    assert_eq!(t["domain"]["memory"]["guest"], "8Gi");
}

#[test]
fn a_secret_with_the_userdata_key_is_referenced_not_copied() {
    let m = machine("m", json!({"cloudInit": {"secretRef": {"name": "boot"}}}));
    let d = derive_with(
        &m,
        &World::empty(),
        Some(SecretData::Present(b"top-secret")),
    );
    assert!(d.secret.is_none());
    let vm = vm_json(&d);
    assert_eq!(
        vm["spec"]["template"]["spec"]["volumes"][1],
        json!({"name": "cloudinitdisk", "cloudInitNoCloud": {"secretRef": {"name": "boot"}}})
    );
    assert!(!vm.to_string().contains("top-secret"));
}

/// Issue 22: on a remote cluster the user's Secret is not there; its data is carried over.
#[test]
fn a_remote_vm_gets_the_users_data_in_a_derived_secret_whatever_its_key() {
    let m = machine("m", json!({"cloudInit": {"secretRef": {"name": "boot"}}}));
    let d = derive_on(
        &m,
        &World::empty(),
        Some(SecretData::Present(b"top-secret")),
        true,
    );
    let secret = d.secret.as_ref().expect("derived");
    assert_eq!(secret.data.as_ref().unwrap()["userdata"].0, b"top-secret");
    let vm = vm_json(&d);
    assert_eq!(
        vm["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"],
        json!({"secretRef": {"name": "m-cloudinit"}})
    );
    assert!(!vm.to_string().contains("top-secret"));
}

#[test]
fn a_secret_with_another_key_is_copied_into_a_derived_secret() {
    let m = machine(
        "m",
        json!({"cloudInit": {"secretRef": {"name": "boot", "key": "cfg"}, "networkData": "n"}}),
    );
    let d = derive_with(
        &m,
        &World::empty(),
        Some(SecretData::Present(b"top-secret")),
    );
    let secret = d.secret.as_ref().expect("derived");
    assert_eq!(secret.metadata.name.as_deref(), Some("m-cloudinit"));
    assert_eq!(secret.data.as_ref().unwrap()["userdata"].0, b"top-secret");
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    let vm = vm_json(&d);
    assert_eq!(
        vm["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"],
        json!({"networkData": "n", "secretRef": {"name": "m-cloudinit"}})
    );
    assert!(!vm.to_string().contains("top-secret"));
    assert!(!format!("{:?}", d.problems).contains("top-secret"));
}

/// Issue 25: virt-api refuses inline networkData over 2048 bytes (we wrote up to 16 KiB); larger
/// network data goes through the derived Secret, beside user data copied there or not.
#[test]
fn network_data_over_2048_bytes_goes_through_the_derived_secret() {
    let volume = |d: &Desired| {
        vm_json(d)["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"].clone()
    };
    let at_limit = machine("m", json!({"cloudInit": {"networkData": "n".repeat(2048)}}));
    let d = derive_with(&at_limit, &World::empty(), None);
    assert!(d.secret.is_none());
    assert_eq!(volume(&d), json!({"networkData": "n".repeat(2048)}));

    let big = "n".repeat(3000);
    let inline_user = machine(
        "m",
        json!({"cloudInit": {"userData": "#cloud-config", "networkData": big}}),
    );
    let d = derive_with(&inline_user, &World::empty(), None);
    let data = d
        .secret
        .as_ref()
        .and_then(|s| s.data.clone())
        .expect("derived");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["networkdata"]);
    assert_eq!(data["networkdata"].0, big.as_bytes());
    assert_eq!(
        volume(&d),
        json!({"userData": "#cloud-config", "networkDataSecretRef": {"name": "m-cloudinit"}})
    );
    assert!(!vm_json(&d).to_string().contains(&big));

    let copied_user = machine(
        "m",
        json!({"cloudInit": {"secretRef": {"name": "boot", "key": "cfg"}, "networkData": big}}),
    );
    let d = derive_with(
        &copied_user,
        &World::empty(),
        Some(SecretData::Present(b"ud")),
    );
    let data = d
        .secret
        .as_ref()
        .and_then(|s| s.data.clone())
        .expect("derived");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["networkdata", "userdata"]);
    assert_eq!(
        volume(&d),
        json!({"secretRef": {"name": "m-cloudinit"}, "networkDataSecretRef": {"name": "m-cloudinit"}})
    );
    let vm: VirtualMachine = serde_json::from_value(vm_json(&d)).expect("VM");
    assert!(super::super::vm::references_secret(&vm, "m-cloudinit"));
}

#[test]
fn a_missing_secret_or_key_holds_back_the_vm() {
    let m = machine(
        "m",
        json!({"cloudInit": {"secretRef": {"name": "boot", "key": "cfg"}}}),
    );
    let d = derive_with(&m, &World::empty(), Some(SecretData::Missing));
    assert_eq!(
        d.problems,
        [Problem::SecretNotFound {
            name: "boot".into()
        }]
    );
    assert!(d.vm.is_none() && d.secret.is_none());
    let d = derive_with(&m, &World::empty(), Some(SecretData::KeyMissing));
    assert_eq!(
        d.problems,
        [Problem::SecretKeyNotFound {
            name: "boot".into(),
            key: "cfg".into()
        }]
    );
}

#[test]
fn inline_user_data_wins_over_a_secret_ref() {
    let m = machine(
        "m",
        json!({"cloudInit": {"userData": "inline", "secretRef": {"name": "boot"}}}),
    );
    assert_eq!(
        cloud_init::secret_source(m.spec.cloud_init.as_ref()),
        None,
        "the Secret is not even read"
    );
    let d = derive_with(&m, &World::empty(), None);
    assert_eq!(
        vm_json(&d)["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"],
        json!({"userData": "inline"})
    );
}

#[test]
fn no_cloud_init_no_volume() {
    let d = derive_with(
        &machine("m", json!({"cloudInit": {}})),
        &World::empty(),
        None,
    );
    let vm = vm_json(&d);
    assert_eq!(
        vm["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn machine_types() {
    for (given, written) in [
        (None, "q35"),
        (Some("pc-q35"), "q35"),
        (Some("pc-i440fx"), "pc"),
        (Some("pc-q35-rhel9.2.0"), "pc-q35-rhel9.2.0"),
        (Some("pc-i440fx-2.12"), "pc-i440fx-2.12"),
    ] {
        let spec = match given {
            Some(t) => json!({"domain": {"machine": {"type": t}}}),
            None => json!({}),
        };
        let d = derive_with(&machine("m", spec), &World::empty(), None);
        assert_eq!(domain(&d)["machine"]["type"], written, "{given:?}");
    }
}

#[test]
fn features_are_written_only_when_set() {
    let d = derive_with(&machine("m", json!({})), &World::empty(), None);
    assert!(domain(&d).get("features").is_none());
    let d = derive_with(
        &machine(
            "m",
            json!({"domain": {"features": {"acpi": false, "apic": true, "hyperv": false}}}),
        ),
        &World::empty(),
        None,
    );
    assert_eq!(
        domain(&d)["features"],
        json!({"acpi": {"enabled": false}, "apic": {"enabled": true}})
    );
    let d = derive_with(
        &machine("m", json!({"domain": {"features": {"hyperv": true}}})),
        &World::empty(),
        None,
    );
    assert_eq!(
        domain(&d)["features"],
        json!({"hyperv": {"relaxed": {"enabled": true}, "vapic": {"enabled": true},
                          "spinlocks": {"enabled": true, "spinlocks": 8191}}})
    );
}

#[test]
fn firmware_efi_and_secure_boot() {
    let fw = |bootloader: Value| {
        let d = derive_with(
            &machine(
                "m",
                json!({"domain": {"firmware": {"bootloader": bootloader}}}),
            ),
            &World::empty(),
            None,
        );
        domain(&d)
    };
    let d = fw(json!({"efi": false}));
    assert!(d.get("firmware").is_none() && d.get("features").is_none());
    let d = fw(json!({"efi": true}));
    assert_eq!(
        d["firmware"],
        json!({"bootloader": {"efi": {"secureBoot": false}}}),
        "KubeVirt turns Secure Boot on unless told otherwise"
    );
    assert!(d.get("features").is_none());
    let d = fw(json!({"efi": true, "secureBoot": true}));
    assert_eq!(
        d["firmware"],
        json!({"bootloader": {"efi": {"secureBoot": true}}})
    );
    assert_eq!(d["features"], json!({"smm": {"enabled": true}}));
}

#[test]
fn boot_order_numbers_devices() {
    let spec = |order: Value| {
        json!({"disks": [{"name": "data", "size": "1Gi"}],
               "networks": [{"name": "eth0", "networkName": "prod"}],
               "cloudInit": {"userData": "x"},
               "bootOrder": order})
    };
    let world = World::empty().with_nc(nc("prod", Some("br0"), None));
    let orders = |order: Value| {
        let d = derive_with(&machine("m", spec(order)), &world, None);
        let dom = domain(&d);
        let disks: Vec<Value> = dom["devices"]["disks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["bootOrder"].clone())
            .collect();
        let nics: Vec<Value> = dom["devices"]["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["bootOrder"].clone())
            .collect();
        (disks, nics)
    };
    assert_eq!(
        orders(json!(["network", "disk"])),
        (vec![json!(2), json!(3), Value::Null], vec![json!(1)]),
        "root and data after the NIC; the cloud-init disk is never booted"
    );
    assert_eq!(
        orders(json!(["disk", "cdrom", "network"])),
        (vec![json!(1), json!(2), Value::Null], vec![json!(3)])
    );
    assert_eq!(
        orders(json!([])),
        (
            vec![Value::Null, Value::Null, Value::Null],
            vec![Value::Null]
        )
    );
}

#[test]
fn running_false_halts() {
    let d = derive_with(
        &machine("m", json!({"running": false})),
        &World::empty(),
        None,
    );
    assert_eq!(vm_json(&d)["spec"]["runStrategy"], "Halted");
}
