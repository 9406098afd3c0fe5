//! Validation rules, each with the message a user sees.

use super::*;

fn check(json: serde_json::Value) -> Outcome {
    validate(
        &serde_json::from_value(json).expect("test spec"),
        &Catalog::default(),
    )
}

fn messages(json: serde_json::Value) -> Vec<String> {
    check(json).errors.iter().map(ToString::to_string).collect()
}

/// Each case KubeVirt's virt-api refuses is refused here, naming the field and the limit.
#[test]
fn kubevirt_parity() {
    let disk = |name: &str, size: &str| serde_json::json!({"name": name, "size": size});
    let many_disks: Vec<_> = (0..257).map(|i| disk(&format!("d{i}"), "1Gi")).collect();
    let nic = |i: usize| serde_json::json!({"name": format!("eth{i}"), "networkName": "n"});
    let networks = |n: usize| (0..n).map(nic).collect::<Vec<_>>();
    let cases = [
        (
            serde_json::json!({"cloudInit": {"userData": "x".repeat(2049)}}),
            "spec.cloudInit.userData: Too long: may not be more than 2048 bytes",
        ),
        (
            serde_json::json!({"cloudInit": {"networkData": "x".repeat(16 * 1024 + 1)}}),
            "spec.cloudInit.networkData: Too long: may not be more than 16384 bytes",
        ),
        (
            serde_json::json!({"disks": many_disks}),
            "spec.disks: Too many: 257: must have at most 256 items",
        ),
        (
            serde_json::json!({"networks": [{"name": "eth0", "networkName": "n", "macAddress": "+2:54:00:12:34:56"}]}),
            r#"spec.networks[0].macAddress: Invalid value: "+2:54:00:12:34:56": must be a MAC address of six hexadecimal octets separated by ':' or '-' (e.g. 52:54:00:12:34:56)"#,
        ),
        (
            serde_json::json!({"disks": [disk("cloudinitdisk", "1Gi")]}),
            r#"spec.disks[0].name: Invalid value: "cloudinitdisk": is reserved for the cloud-init volume"#,
        ),
        (
            serde_json::json!({"domain": {"machine": {"type": "pc-i440fx"}, "firmware": {"bootloader": {"secureBoot": true, "efi": true}}}}),
            "spec.domain.firmware.bootloader.secureBoot: Invalid value: true: secure boot requires a q35 machine type (KubeVirt refuses it with i440fx)",
        ),
        (
            serde_json::json!({"networks": [{"name": "eth0", "networkName": "n".repeat(64)}]}),
            "spec.networks[0].networkName: Too long: may not be more than 63 bytes",
        ),
        (
            serde_json::json!({"disks": [disk("data", "1023Ki")]}),
            r#"spec.disks[0].size: Invalid value: "1023Ki": must be at least 1Mi"#,
        ),
        (
            serde_json::json!({"disks": [disk("data", "1048576.5")]}),
            r#"spec.disks[0].size: Invalid value: "1048576.5": must be a whole number of bytes"#,
        ),
        (
            serde_json::json!({"networks": networks(33)}),
            "spec.networks: Too many: 33: must have at most 32 items",
        ),
        (
            serde_json::json!({"bootOrder": ["disk", "network", "cdrom", "disk"]}),
            "spec.bootOrder: Too many: 4: must have at most 3 items",
        ),
    ];
    for (spec, expected) in cases {
        let got = messages(spec);
        assert!(
            got.iter().any(|m| m == expected),
            "want {expected}\ngot {got:?}"
        );
    }
    // The limits themselves are admitted.
    let ok = serde_json::json!({
        "cloudInit": {"userData": "x".repeat(2048), "networkData": "x".repeat(16 * 1024)},
        "disks": [disk("data", "1Mi")],
        "networks": [{"name": "eth0", "networkName": "n".repeat(63)}],
        "domain": {"machine": {"type": "pc-q35"}, "firmware": {"bootloader": {"secureBoot": true, "efi": true}}},
    });
    assert_eq!(messages(ok), Vec::<String>::new());
    // 255 disks and the template's root: 256 volumes, KubeVirt's most.
    let full = serde_json::json!({"disks": many_disks[..255], "networks": networks(32)});
    assert_eq!(messages(full), Vec::<String>::new());
}

#[test]
fn seed_examples_are_valid() {
    for example in [
        serde_json::json!({"template": "medium"}),
        serde_json::json!({"template": "small", "resources": {"cpu": {"cores": 4}, "memory": {"size": "8Gi"}},
                           "disks": [{"name": "data", "size": "100Gi", "storageClass": "fast-ssd"}]}),
        serde_json::json!({"template": "medium", "networks": [
            {"name": "eth0", "networkName": "prod-network", "model": "virtio"},
            {"name": "eth1", "networkName": "storage-network", "model": "virtio"}]}),
        serde_json::json!({"template": "large", "cloudInit": {"userData": "#cloud-config\nusers: []\n"}}),
    ] {
        assert_eq!(check(example.clone()), Outcome::default(), "{example}");
    }
}

#[test]
fn unknown_template() {
    assert_eq!(
        messages(serde_json::json!({"template": "huge"})),
        [
            r#"spec.template: Unsupported value: "huge": supported values: "large", "medium", "small""#
        ]
    );
}

#[test]
fn cpu_ranges() {
    let ok = serde_json::json!({"resources": {"cpu": {"cores": 256, "threads": 8, "sockets": 16}}});
    assert!(check(ok).errors.is_empty());
    let ok = serde_json::json!({"resources": {"cpu": {"cores": 1, "threads": 1, "sockets": 1}}});
    assert!(check(ok).errors.is_empty());
    assert_eq!(
        messages(
            serde_json::json!({"resources": {"cpu": {"cores": 0, "threads": 9, "sockets": 17}}})
        ),
        [
            "spec.resources.cpu.cores: Invalid value: 0: must be between 1 and 256, inclusive",
            "spec.resources.cpu.threads: Invalid value: 9: must be between 1 and 8, inclusive",
            "spec.resources.cpu.sockets: Invalid value: 17: must be between 1 and 16, inclusive",
        ]
    );
    assert_eq!(
        check(serde_json::json!({"resources": {"cpu": {"cores": 257}}}))
            .errors
            .len(),
        1
    );
}

#[test]
fn memory_minimum_and_format() {
    assert!(
        check(serde_json::json!({"resources": {"memory": {"size": "64Mi"}}}))
            .errors
            .is_empty()
    );
    assert_eq!(
        messages(serde_json::json!({"resources": {"memory": {"size": "63Mi"}}})),
        [r#"spec.resources.memory.size: Invalid value: "63Mi": must be at least 64Mi"#]
    );
    let e = messages(serde_json::json!({"resources": {"memory": {"size": "4GB"}}}));
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with(
            r#"spec.resources.memory.size: Invalid value: "4GB": quantities must match"#
        ),
        "{e:?}"
    );
}

#[test]
fn disk_rules() {
    assert_eq!(
        messages(serde_json::json!({"template": "small", "disks": [
            {"name": "", "size": "1Gi"},
            {"name": "Data", "size": "1Gi"},
            {"name": "data", "size": "0"},
            {"name": "data", "size": "1Gi"},
            {"name": "logs"},
            {"name": "big", "size": "lots"},
            {"name": "c", "size": "1Gi", "storageClass": "Fast_SSD", "accessMode": "ReadWriteAll", "volumeMode": "Raw"},
        ]})),
        [
            "spec.disks[0].name: Required value".to_owned(),
            format!("spec.disks[1].name: Invalid value: \"Data\": {}", super::super::names::LABEL_MSG),
            "spec.disks[2].size: Invalid value: \"0\": must be at least 1Mi".to_owned(),
            "spec.disks[3].name: Duplicate value: \"data\"".to_owned(),
            "spec.disks[4].size: Required value: disk \"logs\" is not in template \"small\", so it needs a size".to_owned(),
            format!("spec.disks[5].size: Invalid value: \"lots\": {}", crate::api::quantity::QuantityError::Syntax),
            format!("spec.disks[6].storageClass: Invalid value: \"Fast_SSD\": {}", super::super::names::SUBDOMAIN_MSG),
            r#"spec.disks[6].accessMode: Unsupported value: "ReadWriteAll": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce""#.to_owned(),
            r#"spec.disks[6].volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem""#.to_owned(),
        ]
    );
    // A template disk needs no size of its own.
    assert!(
        check(serde_json::json!({"template": "small", "disks": [{"name": "root"}]}))
            .errors
            .is_empty()
    );
    assert!(check(serde_json::json!({"disks": [{"name": "d", "size": "1Gi", "accessMode": "ReadOnlyMany", "volumeMode": "Block"}]})).errors.is_empty());
}

#[test]
fn network_rules() {
    assert_eq!(
        messages(serde_json::json!({"networks": [
            {"name": "eth0", "networkName": "prod", "macAddress": "52:54:00:12:34:56"},
            {"name": "eth0", "networkName": "", "model": "ne2000"},
            {"name": "", "networkName": "Bad_Name", "macAddress": "01:00:5e:00:00:01"},
            {"name": "eth3", "networkName": "n", "macAddress": "52-54-00-12-34-56"},
            {"name": "eth4", "networkName": "n", "macAddress": "52:54:00:12:34"},
            {"name": "eth5", "networkName": "n", "macAddress": "00:00:00:00:00:00"},
        ]})),
        [
            "spec.networks[1].name: Duplicate value: \"eth0\"".to_owned(),
            "spec.networks[1].networkName: Required value: the name of a NetworkConfiguration in the Machine's namespace".to_owned(),
            r#"spec.networks[1].model: Unsupported value: "ne2000": supported values: "e1000", "rtl8139", "virtio""#.to_owned(),
            "spec.networks[2].name: Required value".to_owned(),
            format!("spec.networks[2].networkName: Invalid value: \"Bad_Name\": {}", super::super::names::SUBDOMAIN_MSG),
            r#"spec.networks[2].macAddress: Invalid value: "01:00:5e:00:00:01": must be a unicast MAC address (the least significant bit of the first octet must be 0)"#.to_owned(),
            r#"spec.networks[3].macAddress: Duplicate value: "52-54-00-12-34-56""#.to_owned(),
            r#"spec.networks[4].macAddress: Invalid value: "52:54:00:12:34": must be a MAC address of six hexadecimal octets separated by ':' or '-' (e.g. 52:54:00:12:34:56)"#.to_owned(),
            r#"spec.networks[5].macAddress: Invalid value: "00:00:00:00:00:00": must not be all zeros"#.to_owned(),
        ]
    );
    for model in ["virtio", "e1000", "rtl8139"] {
        assert!(
            check(
                serde_json::json!({"networks": [{"name": "a", "networkName": "b", "model": model}]})
            )
            .errors
            .is_empty()
        );
    }
}

#[test]
fn boot_order() {
    let out = check(serde_json::json!({"bootOrder": ["cdrom", "floppy", "cdrom"]}));
    assert_eq!(
        out.errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            r#"spec.bootOrder[1]: Unsupported value: "floppy": supported values: "cdrom", "disk", "network""#,
            r#"spec.bootOrder[2]: Duplicate value: "cdrom""#,
        ]
    );
    assert_eq!(
        out.warnings,
        [r#"spec.bootOrder[0]: "cdrom" is accepted but ignored: the Machine has no cdrom device"#]
    );
}

#[test]
fn cloud_init() {
    let out =
        check(serde_json::json!({"cloudInit": {"userData": "x", "secretRef": {"name": "s"}}}));
    assert!(out.errors.is_empty());
    assert_eq!(
        out.warnings,
        [
            "spec.cloudInit: userData and secretRef are both set; the inline userData is used and secretRef is ignored"
        ]
    );
    assert_eq!(
        messages(serde_json::json!({"cloudInit": {"secretRef": {"name": "", "key": "a/b"}}})),
        [
            "spec.cloudInit.secretRef.name: Required value: the name of a Secret in the Machine's namespace".to_owned(),
            format!("spec.cloudInit.secretRef.key: Invalid value: \"a/b\": {}", super::super::names::CONFIG_KEY_MSG),
        ]
    );
    assert!(
        check(serde_json::json!({"cloudInit": {"secretRef": {"name": "s", "key": "user-data"}}}))
            .warnings
            .is_empty()
    );
}

#[test]
fn machine_types() {
    let every = Catalog::default().with_machine_types(
        crate::machine::machine_types::MachineTypes::parse("q35,pc,pc-*").expect("patterns"),
    );
    let with = |catalog: &Catalog, json| {
        validate(&serde_json::from_value(json).expect("spec"), catalog).errors
    };
    for ok in [
        "pc-q35",
        "pc-i440fx",
        "pc-q35-rhel9.2.0",
        "pc-i440fx-2.12",
        "pc-q35-8.2",
    ] {
        let json = serde_json::json!({"domain": {"machine": {"type": ok}}});
        assert!(with(&every, json.clone()).is_empty(), "{ok}");
        // KubeVirt's default configuration: q35 only (issue 25: i440fx VMs were refused).
        let default = with(&Catalog::default(), json);
        assert_eq!(default.is_empty(), !ok.starts_with("pc-i440fx"), "{ok}");
    }
    for bad in ["q35", "pc", "pc-q35-", "pc-q35x", "virt", "pc-q35-a b"] {
        let json = serde_json::json!({"domain": {"machine": {"type": bad}}});
        let got: Vec<String> = with(&every, json).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [format!(
                r#"spec.domain.machine.type: Unsupported value: {bad:?}: supported values: "pc-i440fx", "pc-i440fx-<version>", "pc-q35", "pc-q35-<version>""#
            )],
        );
    }
    // No type: the default, pc-q35, is what KubeVirt must accept.
    let q35_less = Catalog::default().with_machine_types(
        crate::machine::machine_types::MachineTypes::parse("pc").expect("patterns"),
    );
    assert_eq!(
        with(&q35_less, serde_json::json!({}))
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            r#"spec.domain.machine.type: Unsupported value: "pc-q35": the operator's --allowed-machine-types (ALLOWED_MACHINE_TYPES) allows pc (KubeVirt gets "q35")"#
        ]
    );
}

#[test]
fn secure_boot_requires_efi() {
    assert_eq!(
        messages(serde_json::json!({"domain": {"firmware": {"bootloader": {"secureBoot": true}}}})),
        [
            "spec.domain.firmware.bootloader.secureBoot: Invalid value: true: secure boot requires spec.domain.firmware.bootloader.efi to be true"
        ]
    );
    assert_eq!(messages(serde_json::json!({"domain": {"firmware": {"bootloader": {"secureBoot": true, "efi": false}}}})).len(), 1);
    assert!(check(serde_json::json!({"domain": {"firmware": {"bootloader": {"secureBoot": true, "efi": true}}}})).errors.is_empty());
    assert!(
        check(serde_json::json!({"domain": {"firmware": {"bootloader": {"efi": true}}}}))
            .errors
            .is_empty()
    );
}

#[test]
fn all_errors_at_once() {
    let out = check(serde_json::json!({
        "template": "huge",
        "resources": {"cpu": {"cores": 0}},
        "disks": [{"name": "d", "size": "1Gi", "accessMode": "ReadWriteAll"}],
        "bootOrder": ["usb"],
    }));
    let fields: Vec<&str> = out.errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.template",
            "spec.resources.cpu.cores",
            "spec.disks[0].accessMode",
            "spec.bootOrder[0]"
        ]
    );
}

#[test]
fn machine_names() {
    assert!(validate_name("basic-vm").is_empty());
    assert!(
        validate_name("").is_empty(),
        "generateName: unknown at mutation time"
    );
    let e = validate_name("Basic.VM");
    assert_eq!(e.len(), 1);
    assert!(
        e[0].to_string()
            .starts_with(r#"metadata.name: Invalid value: "Basic.VM": a lowercase RFC 1123 label"#)
    );
    assert_eq!(validate_name(&"a".repeat(64)).len(), 1);
}
