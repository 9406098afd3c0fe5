//! Template resolution: the template's values, the user's overrides field by field, disks merged
//! by name, and the field defaults. The result is what the mutating webhook stores.
//!
//! To re-derive template values when `spec.template` changes, the values this step filled in are
//! recorded in the annotation [`DEFAULTS_ANNOTATION`]. Before resolving again, every recorded value
//! that is still unchanged is taken back out ([`strip_defaults`]), which leaves exactly what the
//! user set; a value the user has since edited no longer matches and so stays theirs.

use crate::api::Quantity;
use crate::api::machine::{
    CloudInit, Cpu, Disk, Domain, MachineSpec, MachineType, Memory, Network, Resources,
    SecretKeyRef,
};

use super::templates::{Catalog, Template};

/// Annotation holding the JSON of the spec values that came from the template, not from the user.
pub const DEFAULTS_ANNOTATION: &str = "vitistack.io/template-defaults";

pub const DEFAULT_ACCESS_MODE: &str = "ReadWriteOnce";
pub const DEFAULT_VOLUME_MODE: &str = "Filesystem";
pub const DEFAULT_NIC_MODEL: &str = "virtio";
pub const DEFAULT_SECRET_KEY: &str = "userdata";
pub const DEFAULT_MACHINE_TYPE: &str = "pc-q35";

/// A resolved spec and the template-derived part of it (the annotation's content).
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub spec: MachineSpec,
    pub from_template: MachineSpec,
}

/// Resolves `spec` against the catalog. `recorded` is what an earlier resolution filled in.
/// An unknown template contributes nothing; validation reports it.
pub fn resolve(spec: &MachineSpec, recorded: Option<&MachineSpec>, catalog: &Catalog) -> Resolved {
    let explicit = match recorded {
        Some(r) => strip_defaults(spec, r),
        None => spec.clone(),
    };
    let mut from_template = MachineSpec::default();
    // A defaulted template name is stored like one the user chose: changing the operator's
    // default affects new Machines only, never resizes existing ones (Kubernetes' own rule for
    // defaults).
    let template_name = explicit
        .template
        .clone()
        .unwrap_or_else(|| catalog.default_template().name.to_owned());
    let template = catalog.get(&template_name);

    let resources = resolve_resources(explicit.resources.as_ref(), template, &mut from_template);
    let disks = resolve_disks(&explicit.disks, template, &mut from_template);

    let resolved = MachineSpec {
        template: Some(template_name),
        resources,
        disks,
        networks: explicit.networks.iter().map(default_network).collect(),
        cdroms: explicit.cdroms.clone(),
        boot_order: explicit.boot_order.clone(),
        cloud_init: explicit.cloud_init.as_ref().map(default_cloud_init),
        domain: Some(default_domain(explicit.domain.as_ref())),
        running: Some(explicit.running.unwrap_or(true)),
    };
    Resolved {
        spec: resolved,
        from_template,
    }
}

fn resolve_resources(
    explicit: Option<&Resources>,
    template: Option<&Template>,
    record: &mut MachineSpec,
) -> Option<Resources> {
    let cpu = explicit.and_then(|r| r.cpu.clone()).unwrap_or_default();
    let memory = explicit
        .and_then(|r| r.memory.as_ref())
        .and_then(|m| m.size.clone());
    let Some(t) = template else {
        return explicit.cloned();
    };
    let mut recorded_cpu = Cpu::default();
    let pick = |value: Option<i64>, from_t: i64, slot: &mut Option<i64>| {
        value.unwrap_or_else(|| {
            *slot = Some(from_t);
            from_t
        })
    };
    let resolved_cpu = Cpu {
        cores: Some(pick(cpu.cores, t.cores, &mut recorded_cpu.cores)),
        threads: Some(pick(cpu.threads, t.threads, &mut recorded_cpu.threads)),
        sockets: Some(pick(cpu.sockets, t.sockets, &mut recorded_cpu.sockets)),
    };
    let size = memory.unwrap_or_else(|| {
        record
            .resources
            .get_or_insert_with(Resources::default)
            .memory = Some(Memory {
            size: Some(t.memory()),
        });
        t.memory()
    });
    if recorded_cpu != Cpu::default() {
        record.resources.get_or_insert_with(Resources::default).cpu = Some(recorded_cpu);
    }
    Some(Resources {
        cpu: Some(resolved_cpu),
        memory: Some(Memory { size: Some(size) }),
    })
}

/// Template disks first, in template order, each overlaid with the user's disk of the same name;
/// then the user's other disks in their order.
fn resolve_disks(
    explicit: &[Disk],
    template: Option<&Template>,
    record: &mut MachineSpec,
) -> Vec<Disk> {
    let template_disks = template.map(|t| t.disks).unwrap_or_default();
    let mut out = Vec::with_capacity(template_disks.len() + explicit.len());
    for (name, size) in template_disks {
        let user = explicit.iter().find(|d| d.name == *name);
        let mut recorded = Disk {
            name: (*name).to_owned(),
            ..Disk::default()
        };
        // A clone without a size takes its source's size (CDI detects it), not the template's.
        let clone = user.is_some_and(|d| d.source.as_ref().is_some_and(|s| s.is_clone()));
        let size = match user.and_then(|d| d.size.clone()) {
            Some(size) => Some(size),
            None if clone => None,
            None => {
                recorded.size = Some(Quantity::from(*size));
                Some(Quantity::from(*size))
            }
        };
        let mut disk = default_disk(&Disk {
            size,
            ..user.cloned().unwrap_or_else(|| recorded.clone())
        });
        disk.name = (*name).to_owned();
        if user.is_none() {
            // The whole entry came from the template, field defaults included.
            recorded = disk.clone();
        }
        if recorded.size.is_some() || user.is_none() {
            record.disks.push(recorded);
        }
        out.push(disk);
    }
    out.extend(
        explicit
            .iter()
            .filter(|d| !template_disks.iter().any(|(name, _)| *name == d.name))
            .map(default_disk),
    );
    out
}

fn default_disk(d: &Disk) -> Disk {
    Disk {
        access_mode: Some(
            d.access_mode
                .clone()
                .unwrap_or_else(|| DEFAULT_ACCESS_MODE.to_owned()),
        ),
        volume_mode: Some(
            d.volume_mode
                .clone()
                .unwrap_or_else(|| DEFAULT_VOLUME_MODE.to_owned()),
        ),
        ..d.clone()
    }
}

fn default_network(n: &Network) -> Network {
    Network {
        model: Some(
            n.model
                .clone()
                .unwrap_or_else(|| DEFAULT_NIC_MODEL.to_owned()),
        ),
        ..n.clone()
    }
}

fn default_cloud_init(c: &CloudInit) -> CloudInit {
    CloudInit {
        secret_ref: c.secret_ref.as_ref().map(|r| SecretKeyRef {
            name: r.name.clone(),
            key: Some(
                r.key
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SECRET_KEY.to_owned()),
            ),
        }),
        ..c.clone()
    }
}

fn default_domain(d: Option<&Domain>) -> Domain {
    let d = d.cloned().unwrap_or_default();
    let type_ = d
        .machine
        .as_ref()
        .and_then(|m| m.type_.clone())
        .unwrap_or_else(|| DEFAULT_MACHINE_TYPE.to_owned());
    Domain {
        machine: Some(MachineType { type_: Some(type_) }),
        ..d
    }
}

/// Takes back out every recorded template value that is still unchanged in `spec`.
pub fn strip_defaults(spec: &MachineSpec, recorded: &MachineSpec) -> MachineSpec {
    let mut out = spec.clone();
    if let (Some(res), Some(rec)) = (out.resources.as_mut(), recorded.resources.as_ref()) {
        if let (Some(cpu), Some(rec_cpu)) = (res.cpu.as_mut(), rec.cpu.as_ref()) {
            unset_if_same(&mut cpu.cores, &rec_cpu.cores);
            unset_if_same(&mut cpu.threads, &rec_cpu.threads);
            unset_if_same(&mut cpu.sockets, &rec_cpu.sockets);
            if *cpu == Cpu::default() {
                res.cpu = None;
            }
        }
        if let (Some(mem), Some(rec_mem)) = (res.memory.as_mut(), rec.memory.as_ref()) {
            unset_if_same(&mut mem.size, &rec_mem.size);
            if mem.size.is_none() {
                res.memory = None;
            }
        }
        if res.cpu.is_none() && res.memory.is_none() {
            out.resources = None;
        }
    }
    out.disks.retain_mut(|disk| {
        let Some(rec) = recorded.disks.iter().find(|r| r.name == disk.name) else {
            return true;
        };
        unset_if_same(&mut disk.size, &rec.size);
        unset_if_same(&mut disk.storage_class, &rec.storage_class);
        unset_if_same(&mut disk.access_mode, &rec.access_mode);
        unset_if_same(&mut disk.volume_mode, &rec.volume_mode);
        // A disk left with only its name came from the template as a whole.
        *disk
            != Disk {
                name: disk.name.clone(),
                ..Disk::default()
            }
    });
    out
}

fn unset_if_same<T: PartialEq>(value: &mut Option<T>, recorded: &Option<T>) {
    if recorded.is_some() && value == recorded {
        *value = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::machine::{Bootloader, Firmware};

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
        let s =
            resolved(serde_json::json!({"template": "medium", "resources": {"cpu": {"cores": 4}}}));
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
        assert_eq!(root.access_mode.as_deref(), Some("ReadWriteOnce"));
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
            assert_eq!(
                (d.access_mode.as_deref(), d.volume_mode.as_deref()),
                (Some("ReadWriteOnce"), Some("Filesystem"))
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
        let s =
            resolved(serde_json::json!({"template": "huge", "resources": {"cpu": {"cores": 2}}}));
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
                sockets: None
            }
        );
        assert_eq!(disks_of(&explicit.disks), vec!["data"]);
        let grown = spec(
            serde_json::json!({"disks": [{"name": "root", "size": "50Gi", "accessMode": "ReadWriteOnce", "volumeMode": "Filesystem"}]}),
        );
        let explicit = strip_defaults(&grown, &recorded);
        assert_eq!(explicit.disks[0].size, Some(Quantity::from("50Gi")));
    }

    fn disks_of(d: &[Disk]) -> Vec<&str> {
        d.iter().map(|d| d.name.as_str()).collect()
    }
}
