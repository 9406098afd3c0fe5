use super::*;
use crate::api::Quantity;
use crate::api::domain::{Bootloader, Firmware};

fn spec(json: serde_json::Value) -> MachineSpec {
    serde_json::from_value(json).expect("test spec")
}

fn resolved(json: serde_json::Value) -> MachineSpec {
    resolve(&spec(json), None, &Catalog::default()).spec
}

fn cpu(s: &MachineSpec) -> (i64, i64, i64) {
    let c = s
        .resources
        .as_ref()
        .and_then(|r| r.cpu.clone())
        .unwrap_or_default();
    (
        c.cores.unwrap_or(0),
        c.threads.unwrap_or(0),
        c.sockets.unwrap_or(0),
    )
}

fn memory(s: &MachineSpec) -> String {
    s.resources
        .as_ref()
        .and_then(|r| r.memory.as_ref())
        .and_then(|m| m.size.clone())
        .map(|q| q.0)
        .unwrap_or_default()
}

fn disks(s: &MachineSpec) -> Vec<(String, String)> {
    s.disks
        .iter()
        .map(|d| {
            (
                d.name.clone(),
                d.size.clone().map(|q| q.0).unwrap_or_default(),
            )
        })
        .collect()
}

fn pair(name: &str, size: &str) -> (String, String) {
    (name.to_owned(), size.to_owned())
}

#[test]
fn each_template_applies_its_table_row() {
    for (name, cores, mem, root) in [
        ("small", 1, "2Gi", "20Gi"),
        ("medium", 2, "4Gi", "40Gi"),
        ("large", 4, "8Gi", "80Gi"),
    ] {
        let s = resolved(serde_json::json!({"template": name}));
        assert_eq!(s.template.as_deref(), Some(name));
        assert_eq!(cpu(&s), (cores, 1, 1), "{name}");
        assert_eq!(memory(&s), mem, "{name}");
        assert_eq!(disks(&s), vec![pair("root", root)], "{name}");
    }
}

#[test]
fn unset_template_uses_the_default() {
    let s = resolved(serde_json::json!({}));
    assert_eq!(s.template.as_deref(), Some("medium"));
    assert_eq!((cpu(&s), memory(&s)), ((2, 1, 1), "4Gi".to_owned()));
    let large = Catalog::with_default("large").unwrap();
    let s = resolve(&MachineSpec::default(), None, &large).spec;
    assert_eq!((s.template.as_deref(), cpu(&s)), (Some("large"), (4, 1, 1)));
}

#[test]
fn seed_basic_vm() {
    let s = resolved(serde_json::json!({"template": "medium"}));
    assert_eq!(
        (cpu(&s), memory(&s), disks(&s)),
        ((2, 1, 1), "4Gi".to_owned(), vec![pair("root", "40Gi")])
    );
}

#[test]
fn cpu_overrides_field_by_field() {
    let s = resolved(serde_json::json!({"template": "medium", "resources": {"cpu": {"cores": 4}}}));
    assert_eq!((cpu(&s), memory(&s)), ((4, 1, 1), "4Gi".to_owned()));
    let s = resolved(
        serde_json::json!({"template": "small", "resources": {"cpu": {"threads": 2, "sockets": 2}}}),
    );
    assert_eq!(cpu(&s), (1, 2, 2));
}

#[test]
fn seed_custom_vm_memory_and_disk_merge() {
    let s = resolved(serde_json::json!({
        "template": "small",
        "resources": {"cpu": {"cores": 4}, "memory": {"size": "8Gi"}},
        "disks": [{"name": "data", "size": "100Gi", "storageClass": "fast-ssd"}]
    }));
    assert_eq!((cpu(&s), memory(&s)), ((4, 1, 1), "8Gi".to_owned()));
    assert_eq!(disks(&s), vec![pair("root", "20Gi"), pair("data", "100Gi")]);
    assert_eq!(s.disks[1].storage_class.as_deref(), Some("fast-ssd"));
    assert_eq!(
        s.disks[0].storage_class, None,
        "templates set no StorageClass"
    );
}

#[test]
fn a_disk_named_like_a_template_disk_overrides_only_what_it_sets() {
    let s = resolved(serde_json::json!({
        "template": "large",
        "disks": [{"name": "root", "storageClass": "fast", "volumeMode": "Block"}]
    }));
    let root = &s.disks[0];
    assert_eq!(disks(&s), vec![pair("root", "80Gi")]);
    assert_eq!(root.storage_class.as_deref(), Some("fast"));
    assert_eq!(root.volume_mode.as_deref(), Some("Block"));
    assert_eq!(
        root.access_mode, None,
        "left to the reconciler's StorageProfile rule"
    );
    let s = resolved(
        serde_json::json!({"template": "small", "disks": [{"name": "root", "size": "50Gi"}]}),
    );
    assert_eq!(disks(&s), vec![pair("root", "50Gi")]);
}

#[test]
fn a_clone_without_size_keeps_the_source_size_an_import_takes_the_template_size() {
    let s = resolved(serde_json::json!({"template": "small", "disks": [
        {"name": "root", "source": {"pvc": {"name": "golden"}}},
        {"name": "data", "size": "5Gi", "source": {"dataSource": {"name": "d"}}}
    ]}));
    assert_eq!(disks(&s), vec![pair("root", ""), pair("data", "5Gi")]);
    let r = resolve(
        &spec(
            serde_json::json!({"template": "small", "disks": [{"name": "root", "source": {"pvc": {"name": "golden"}}}]}),
        ),
        None,
        &Catalog::default(),
    );
    assert!(r.from_template.disks.iter().all(|d| d.size.is_none()));
    let s = resolved(serde_json::json!({"template": "small", "disks": [
        {"name": "root", "source": {"http": {"url": "https://example.com/a.qcow2"}}}
    ]}));
    assert_eq!(disks(&s), vec![pair("root", "20Gi")]);
    assert!(s.disks[0].source.is_some());
}

#[test]
fn user_disks_keep_their_order_after_template_disks() {
    let s = resolved(serde_json::json!({"disks": [
        {"name": "b", "size": "1Gi"}, {"name": "root", "size": "60Gi"}, {"name": "a", "size": "2Gi"}
    ]}));
    assert_eq!(
        disks(&s),
        vec![pair("root", "60Gi"), pair("b", "1Gi"), pair("a", "2Gi")]
    );
}

#[test]
fn field_defaults() {
    let s = resolved(serde_json::json!({
        "disks": [{"name": "data", "size": "1Gi"}],
        "networks": [{"name": "eth0", "networkName": "prod"}],
        "cloudInit": {"secretRef": {"name": "s"}}
    }));
    for d in &s.disks {
        // Chosen by the reconciler from the class's StorageProfile, not defaulted here.
        assert_eq!(
            (d.access_mode.as_deref(), d.volume_mode.as_deref()),
            (None, None)
        );
    }
    assert_eq!(s.networks[0].model.as_deref(), Some("virtio"));
    assert_eq!(
        s.cloud_init.unwrap().secret_ref.unwrap().key.as_deref(),
        Some("userdata")
    );
    assert_eq!(
        s.domain.unwrap().machine.unwrap().type_.as_deref(),
        Some("pc-q35")
    );
    assert_eq!(s.running, Some(true));
}

#[test]
fn explicit_values_are_never_replaced_by_defaults() {
    let s = resolved(serde_json::json!({
        "running": false,
        "networks": [{"name": "eth0", "networkName": "n", "model": "e1000", "macAddress": "52:54:00:00:00:01"}],
        "disks": [{"name": "d", "size": "1Gi", "accessMode": "ReadWriteMany", "volumeMode": "Block"}],
        "cloudInit": {"userData": "#cloud-config", "secretRef": {"name": "s", "key": "k"}},
        "domain": {"machine": {"type": "pc-i440fx"}, "features": {"acpi": true},
                   "firmware": {"bootloader": {"efi": true, "secureBoot": true}}},
        "bootOrder": ["network", "disk"]
    }));
    assert_eq!(s.running, Some(false));
    assert_eq!(s.networks[0].model.as_deref(), Some("e1000"));
    assert_eq!(s.disks[1].access_mode.as_deref(), Some("ReadWriteMany"));
    assert_eq!(s.disks[1].volume_mode.as_deref(), Some("Block"));
    assert_eq!(
        s.cloud_init
            .as_ref()
            .unwrap()
            .secret_ref
            .as_ref()
            .unwrap()
            .key
            .as_deref(),
        Some("k")
    );
    let domain = s.domain.unwrap();
    assert_eq!(domain.machine.unwrap().type_.as_deref(), Some("pc-i440fx"));
    assert_eq!(domain.features.unwrap().acpi, Some(true));
    assert_eq!(
        domain.firmware,
        Some(Firmware {
            bootloader: Some(Bootloader {
                efi: Some(true),
                secure_boot: Some(true)
            })
        })
    );
    assert_eq!(s.boot_order, vec!["network", "disk"]);
}

#[test]
fn resolving_is_idempotent_with_the_record() {
    for input in [
        serde_json::json!({}),
        serde_json::json!({"template": "small", "disks": [{"name": "data", "size": "100Gi"}]}),
        serde_json::json!({"resources": {"cpu": {"cores": 8}}, "disks": [{"name": "root", "storageClass": "x"}]}),
    ] {
        let first = resolve(&spec(input.clone()), None, &Catalog::default());
        let second = resolve(&first.spec, Some(&first.from_template), &Catalog::default());
        assert_eq!(first, second, "{input}");
    }
}

#[test]
fn changing_the_template_rederives_template_values_and_keeps_overrides() {
    let catalog = Catalog::default();
    let first = resolve(
        &spec(
            serde_json::json!({"template": "medium", "resources": {"cpu": {"threads": 2}},
                                  "disks": [{"name": "root", "storageClass": "fast"}, {"name": "data", "size": "5Gi"}]}),
        ),
        None,
        &catalog,
    );
    let mut changed = first.spec.clone();
    changed.template = Some("large".into());
    let second = resolve(&changed, Some(&first.from_template), &catalog).spec;
    assert_eq!(cpu(&second), (4, 2, 1), "cores re-derived, threads kept");
    assert_eq!(memory(&second), "8Gi");
    assert_eq!(
        disks(&second),
        vec![pair("root", "80Gi"), pair("data", "5Gi")]
    );
    assert_eq!(second.disks[0].storage_class.as_deref(), Some("fast"));
}

#[test]
fn changing_the_template_never_gives_a_clone_the_template_size() {
    let catalog = Catalog::default();
    let first = |root: serde_json::Value| {
        resolve(
            &spec(serde_json::json!({"template": "small", "disks": [root]})),
            None,
            &catalog,
        )
    };
    let change_to_large = |first: &Resolved| {
        let mut changed = first.spec.clone();
        changed.template = Some("large".into());
        resolve(&changed, Some(&first.from_template), &catalog)
    };
    let clone = first(serde_json::json!({"name": "root", "source": {"pvc": {"name": "golden"}}}));
    let second = change_to_large(&clone);
    assert_eq!(disks(&second.spec), vec![pair("root", "")]);
    assert!(second.from_template.disks.iter().all(|d| d.size.is_none()));
    assert!(second.spec.disks[0].source.is_some());
    // The same change does re-derive an import's size: the clone's stays unset by rule.
    let import = first(
        serde_json::json!({"name": "root", "source": {"http": {"url": "https://example.com/a.qcow2"}}}),
    );
    assert_eq!(
        disks(&change_to_large(&import).spec),
        vec![pair("root", "80Gi")]
    );
}

#[test]
fn a_value_edited_after_defaulting_becomes_explicit() {
    let catalog = Catalog::default();
    let first = resolve(&MachineSpec::default(), None, &catalog);
    let mut edited = first.spec.clone();
    edited
        .resources
        .as_mut()
        .unwrap()
        .cpu
        .as_mut()
        .unwrap()
        .cores = Some(3);
    edited.template = Some("large".into());
    let second = resolve(&edited, Some(&first.from_template), &catalog).spec;
    assert_eq!(cpu(&second), (3, 1, 1));
    assert_eq!(memory(&second), "8Gi");
}

#[test]
fn a_defaulted_template_stays_when_the_default_changes() {
    let first = resolve(&MachineSpec::default(), None, &Catalog::default());
    assert_eq!(
        first.from_template.template, None,
        "the template name is not re-derived"
    );
    let again = resolve(
        &first.spec,
        Some(&first.from_template),
        &Catalog::with_default("small").unwrap(),
    )
    .spec;
    assert_eq!(
        (again.template.as_deref(), cpu(&again), memory(&again)),
        (Some("medium"), (2, 1, 1), "4Gi".to_owned())
    );
    assert_eq!(disks(&again), vec![pair("root", "40Gi")]);
}

#[test]
fn unknown_template_contributes_nothing() {
    let s = resolved(serde_json::json!({"template": "huge", "resources": {"cpu": {"cores": 2}}}));
    assert_eq!(s.template.as_deref(), Some("huge"));
    assert_eq!(s.resources.unwrap().cpu.unwrap().threads, None);
    assert!(s.disks.is_empty());
}

#[test]
fn strip_only_removes_unchanged_recorded_values() {
    let recorded = spec(
        serde_json::json!({"template": "medium", "resources": {"cpu": {"cores": 2}},
                                           "disks": [{"name": "root", "size": "40Gi", "accessMode": "ReadWriteOnce", "volumeMode": "Filesystem"}]}),
    );
    let stored = spec(
        serde_json::json!({"template": "medium", "resources": {"cpu": {"cores": 2, "threads": 1}},
                                         "disks": [{"name": "root", "size": "40Gi", "accessMode": "ReadWriteOnce", "volumeMode": "Filesystem"},
                                                   {"name": "data", "size": "1Gi"}]}),
    );
    let explicit = strip_defaults(&stored, &recorded);
    assert_eq!(
        explicit.template.as_deref(),
        Some("medium"),
        "the template name is always the user's"
    );
    assert_eq!(
        explicit.resources.unwrap().cpu.unwrap(),
        Cpu {
            cores: None,
            threads: Some(1),
            sockets: None,
            max_sockets: None,
            ..Cpu::default()
        }
    );
    // Modes an earlier version recorded stay: its claim was made with them.
    assert_eq!(disks_of(&explicit.disks), vec!["root", "data"]);
    assert_eq!(
        explicit.disks[0].size, None,
        "the template's size is stripped"
    );
    let grown = spec(
        serde_json::json!({"disks": [{"name": "root", "size": "50Gi", "accessMode": "ReadWriteOnce", "volumeMode": "Filesystem"}]}),
    );
    let explicit = strip_defaults(&grown, &recorded);
    assert_eq!(explicit.disks[0].size, Some(Quantity::from("50Gi")));
}

fn disks_of(d: &[Disk]) -> Vec<&str> {
    d.iter().map(|d| d.name.as_str()).collect()
}
