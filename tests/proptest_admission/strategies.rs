//! Valid Machines, as a user would write them.

#[allow(unused_imports)]
use crate::*;
use proptest::sample::{select, subsequence};
use serde_json::{Map, Value, json};

// ------------------------------------------------------------------------------------------
// Valid Machines, as a user would write them.

pub(crate) fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    proptest::option::of(s).boxed()
}

pub(crate) fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        map.insert(key.to_owned(), v);
    }
}

pub(crate) fn object(fields: Vec<(&str, Option<Value>)>) -> Value {
    let mut map = Map::new();
    for (k, v) in fields {
        put(&mut map, k, v);
    }
    Value::Object(map)
}

pub(crate) fn memory_size() -> impl Strategy<Value = Value> {
    prop_oneof![
        select(vec!["64Mi", "512Mi", "1Gi", "3Gi", "16Gi", "2G", "1.5Gi"]).prop_map(|s| json!(s)),
        (1u32..64).prop_map(|n| json!(format!("{n}Gi"))),
        Just(json!(1_073_741_824u64)),
    ]
}

pub(crate) fn disk_size() -> impl Strategy<Value = Value> {
    prop_oneof![
        (1u32..200).prop_map(|n| json!(format!("{n}Gi"))),
        select(vec!["1Ti", "500Mi", "1.5Gi", "100G"]).prop_map(|s| json!(s)),
        Just(json!(10_737_418_240u64)),
    ]
}

pub(crate) fn disk(name: &'static str) -> impl Strategy<Value = Value> {
    // Only the template's root disk may leave out its size.
    let size = if name == "root" {
        opt(disk_size())
    } else {
        disk_size().prop_map(Some).boxed()
    };
    (
        size,
        opt(select(vec!["fast-ssd", "ceph.rbd", "standard"])),
        opt(select(vec![
            "ReadWriteOnce",
            "ReadWriteMany",
            "ReadOnlyMany",
        ])),
        opt(select(vec!["Filesystem", "Block"])),
    )
        .prop_map(move |(size, class, access, volume)| {
            object(vec![
                ("name", Some(json!(name))),
                ("size", size),
                ("storageClass", class.map(|s| json!(s))),
                ("accessMode", access.map(|s| json!(s))),
                ("volumeMode", volume.map(|s| json!(s))),
            ])
        })
}

pub(crate) fn disks() -> impl Strategy<Value = Vec<Value>> {
    subsequence(vec!["root", "data", "logs", "scratch", "d-1"], 0..=4)
        .prop_shuffle()
        .prop_flat_map(|names| names.into_iter().map(disk).collect::<Vec<_>>())
}

pub(crate) fn networks() -> impl Strategy<Value = Vec<Value>> {
    subsequence(vec!["eth0", "eth1", "net-2"], 0..=3)
        .prop_shuffle()
        .prop_flat_map(|names| {
            names
                .into_iter()
                .enumerate()
                .map(|(i, name)| {
                    (
                        select(vec!["prod-network", "storage-network", "n1"]),
                        opt(select(vec!["virtio", "e1000", "rtl8139"])),
                        any::<bool>(),
                    )
                        .prop_map(move |(net, model, mac)| {
                            object(vec![
                                ("name", Some(json!(name))),
                                ("networkName", Some(json!(net))),
                                ("model", model.map(|m| json!(m))),
                                // Unique unicast MACs: the index is the last octet.
                                (
                                    "macAddress",
                                    mac.then(|| json!(format!("52:54:00:00:00:{i:02x}"))),
                                ),
                            ])
                        })
                })
                .collect::<Vec<_>>()
        })
}

pub(crate) fn cloud_init() -> impl Strategy<Value = Value> {
    let secret_ref = (
        select(vec!["machine-secrets", "s", "cloud.init"]),
        opt(select(vec!["userdata", "user-data.yaml", "KEY_1"])),
    )
        .prop_map(|(name, key)| {
            object(vec![
                ("name", Some(json!(name))),
                ("key", key.map(|k| json!(k))),
            ])
        });
    (
        opt("#cloud-config\n[a-z: \n]{0,20}".prop_map(|s| json!(s))),
        opt("version: 2\n".prop_map(|s: String| json!(s))),
        opt(secret_ref),
    )
        .prop_map(|(user, net, secret)| {
            object(vec![
                ("userData", user),
                ("networkData", net),
                ("secretRef", secret),
            ])
        })
}

pub(crate) fn domain() -> impl Strategy<Value = Value> {
    let machine = opt(select(vec![
        "pc-q35",
        "pc-i440fx",
        "pc-q35-rhel9.2.0",
        "pc-i440fx-2.12",
    ]))
    .prop_map(|t| object(vec![("type", t.map(|t| json!(t)))]));
    let features =
        (opt(any::<bool>()), opt(any::<bool>()), opt(any::<bool>())).prop_map(|(a, b, c)| {
            object(vec![
                ("acpi", a.map(Value::Bool)),
                ("apic", b.map(Value::Bool)),
                ("hyperv", c.map(Value::Bool)),
            ])
        });
    let firmware = (opt(any::<bool>()), opt(any::<bool>())).prop_map(|(efi, secure)| {
        // secureBoot requires efi.
        let efi = if secure == Some(true) { Some(true) } else { efi };
        json!({"bootloader": object(vec![("efi", efi.map(Value::Bool)), ("secureBoot", secure.map(Value::Bool))])})
    });
    (opt(machine), opt(features), opt(firmware)).prop_map(|(m, f, fw)| {
        // secureBoot requires q35 (KubeVirt refuses it with i440fx).
        let secure = fw
            .as_ref()
            .and_then(|fw| fw.pointer("/bootloader/secureBoot"))
            == Some(&Value::Bool(true));
        let i440fx = |m: &Value| {
            m["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("pc-i440fx"))
        };
        let m = match m {
            Some(m) if secure && i440fx(&m) => Some(json!({"type": "pc-q35"})),
            other => other,
        };
        object(vec![("machine", m), ("features", f), ("firmware", fw)])
    })
}

pub(crate) fn valid_spec() -> impl Strategy<Value = Value> {
    let cpu = (opt(1i64..=256), opt(1i64..=8), opt(1i64..=16)).prop_map(|(c, t, s)| {
        object(vec![
            ("cores", c.map(Value::from)),
            ("threads", t.map(Value::from)),
            ("sockets", s.map(Value::from)),
        ])
    });
    let memory = opt(memory_size()).prop_map(|size| object(vec![("size", size)]));
    let resources = (opt(cpu), opt(memory))
        .prop_map(|(cpu, memory)| object(vec![("cpu", cpu), ("memory", memory)]));
    (
        opt(select(TEMPLATES.to_vec())),
        opt(resources),
        disks(),
        networks(),
        subsequence(vec!["disk", "network", "cdrom"], 0..=3).prop_shuffle(),
        opt(cloud_init()),
        opt(domain()),
        opt(any::<bool>()),
    )
        .prop_map(|(tpl, res, disks, nets, boot, ci, dom, running)| {
            let list = |v: Vec<Value>| (!v.is_empty()).then_some(Value::Array(v));
            object(vec![
                ("template", tpl.map(|t| json!(t))),
                ("resources", res),
                ("disks", list(disks)),
                ("networks", list(nets)),
                (
                    "bootOrder",
                    list(boot.into_iter().map(|b| json!(b)).collect()),
                ),
                ("cloudInit", ci),
                ("domain", dom),
                ("running", running.map(Value::Bool)),
            ])
        })
}
