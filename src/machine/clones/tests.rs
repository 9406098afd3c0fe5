use serde_json::{Value, json};

use super::*;

fn spec(v: Value) -> MachineSpec {
    serde_json::from_value(v).expect("spec")
}

/// The source as the webhook stores a Machine: resolved, MACs and an address assigned.
fn stored_source() -> MachineSpec {
    spec(json!({
        "template": "medium",
        "resources": {"cpu": {"cores": 2}, "memory": {"size": "4Gi"}},
        "disks": [
            {"name": "root", "size": "40Gi", "accessMode": "ReadWriteOnce", "volumeMode": "Block",
             "source": {"http": {"url": "https://images/debian.qcow2"}}},
            {"name": "data", "size": "100Gi", "storageClass": "fast"}
        ],
        "networks": [{"name": "lan", "networkName": "office", "model": "virtio",
                      "macAddress": "52:54:00:00:00:01", "addresses": ["10.0.0.5/24"]}],
        "cdroms": [{"name": "iso", "source": {"http": {"url": "https://images/installer.iso"}}}],
        "bootOrder": ["disk"],
        "cloudInit": {"userData": "#cloud-config\n", "networkData": "version: 2\n"},
        "domain": {"firmware": {"bootloader": {"efi": true}}},
        "running": true,
        "runStrategy": "Always",
        "snapshots": {"schedule": "0 2 * * *"},
        "updateStrategy": "Restart"
    }))
}

fn source(s: &MachineSpec) -> SourceMachine<'_> {
    SourceMachine {
        name: "web",
        spec: s,
        cluster: None,
        copies: Copies::Claims,
    }
}

fn clone_of(extra: Value) -> MachineSpec {
    let mut v = json!({"cloneFrom": {"machine": "web"}});
    v.as_object_mut()
        .expect("object")
        .extend(extra.as_object().expect("object").clone());
    spec(v)
}

#[test]
fn a_clone_takes_the_sources_shape_never_its_identity() {
    let from = stored_source();
    let new = clone_of(json!({"runStrategy": "Halted"}));
    let filled = fill(&source(&from), &new, None).expect("filled");
    let got = serde_json::to_value(&filled).expect("json");
    assert_eq!(
        got,
        json!({
            "template": "medium",
            "resources": {"cpu": {"cores": 2}, "memory": {"size": "4Gi"}},
            // Every disk a clone of the source's claim, whatever the source's own source.
            "disks": [
                {"name": "root", "size": "40Gi", "accessMode": "ReadWriteOnce",
                 "volumeMode": "Block", "source": {"pvc": {"name": "web-root"}}},
                {"name": "data", "size": "100Gi", "storageClass": "fast",
                 "source": {"pvc": {"name": "web-data"}}}
            ],
            // No MAC and no address: the webhook assigns fresh ones.
            "networks": [{"name": "lan", "networkName": "office", "model": "virtio"}],
            "bootOrder": ["disk"],
            // Network data may spell the source's addresses: not copied.
            "cloudInit": {"userData": "#cloud-config\n"},
            "domain": {"firmware": {"bootloader": {"efi": true}}},
            // The new Machine's own: no CD-ROMs, no schedule, its run strategy.
            "runStrategy": "Halted",
            "updateStrategy": "Restart",
            "cloneFrom": {"machine": "web"}
        })
    );
    // The webhook may be called again on its own output: nothing changes.
    assert_eq!(fill(&source(&from), &filled, None), Ok(filled.clone()));
}

#[test]
fn what_the_new_machine_sets_wins() {
    let from = stored_source();
    let new = clone_of(json!({
        "template": "large",
        "disks": [{"name": "data", "size": "200Gi"}, {"name": "scratch", "size": "10Gi"}],
        "networks": [{"name": "wan", "networkName": "dmz"}],
        "cloudInit": {"userData": "#cloud-config\nhostname: web2\n"}
    }));
    let filled = fill(&source(&from), &new, None).expect("filled");
    assert_eq!(filled.template.as_deref(), Some("large"));
    let disks = serde_json::to_value(&filled.disks).expect("json");
    assert_eq!(
        disks,
        json!([
            {"name": "root", "size": "40Gi", "accessMode": "ReadWriteOnce", "volumeMode": "Block",
             "source": {"pvc": {"name": "web-root"}}},
            // Grown at clone time, still a clone, still on the source's class.
            {"name": "data", "size": "200Gi", "storageClass": "fast",
             "source": {"pvc": {"name": "web-data"}}},
            {"name": "scratch", "size": "10Gi"}
        ])
    );
    assert_eq!(filled.networks, new.networks);
    assert_eq!(filled.cloud_init, new.cloud_init);
}

#[test]
fn refusals_name_the_field_and_the_reason() {
    let from = stored_source();
    let text = |r: Result<MachineSpec, Vec<FieldError>>| -> Vec<String> {
        r.expect_err("refused")
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    // A disk of the source's name with a source of its own.
    let other = clone_of(json!({"disks": [{"name": "root", "source": {"pvc": {"name": "mine"}}}]}));
    let got = text(fill(&source(&from), &other, None));
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with(
            "spec.disks[0].source: Forbidden: disk \"root\" is a clone of the claim web-root"
        ),
        "{got:?}"
    );
    // The source on another cluster.
    let remote = SourceMachine {
        cluster: Some("dc2"),
        ..source(&from)
    };
    let got = text(fill(&remote, &clone_of(json!({})), None));
    assert!(got[0].starts_with("spec.cloneFrom.machine: Forbidden: Machine web runs on the cluster of KubevirtConfig dc2"), "{got:?}");
    // The new Machine on another cluster.
    let got = text(fill(&source(&from), &clone_of(json!({})), Some("dc2")));
    assert!(
        got[0].starts_with(
            "spec.cloneFrom: Forbidden: this Machine is placed on the cluster of KubevirtConfig dc2"
        ),
        "{got:?}"
    );
}

#[test]
fn the_field_names_one_machine_and_never_changes() {
    let cases = [
        (json!({"cloneFrom": {"machine": "web"}}), Vec::<&str>::new()),
        (json!({}), vec![]),
        (
            json!({"cloneFrom": {}}),
            vec![
                "spec.cloneFrom: Required value: exactly one of machine (a Machine) or snapshot (a MachineSnapshot) in this namespace",
            ],
        ),
        (
            json!({"cloneFrom": {"machine": "Web_1"}}),
            vec![
                "spec.cloneFrom.machine: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
    ];
    for (v, want) in cases {
        let got: Vec<String> = errors(&spec(v.clone()))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, want, "{v}");
    }
    let a = spec(json!({"cloneFrom": {"machine": "web"}}));
    let b = spec(json!({"cloneFrom": {"machine": "db"}}));
    let none = spec(json!({}));
    assert!(update_errors(&a, &a).is_empty());
    assert!(update_errors(&none, &none).is_empty());
    for (old, new) in [(&a, &b), (&a, &none), (&none, &a)] {
        let got: Vec<String> = update_errors(old, new)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "spec.cloneFrom: Forbidden: is immutable: the Machine was made from its source when it was created"
            ]
        );
    }
}

#[test]
fn a_clone_of_a_snapshot_clones_each_disks_volume_snapshot() {
    let from = stored_source();
    let volumes = std::collections::BTreeMap::from([
        ("root".to_owned(), "vmsnapshot-1-volume-root".to_owned()),
        ("data".to_owned(), "vmsnapshot-1-volume-data".to_owned()),
    ]);
    let snap = SourceMachine {
        copies: Copies::Snapshot {
            snapshot: "web-nightly",
            volumes: &volumes,
        },
        ..source(&from)
    };
    let new = spec(json!({"cloneFrom": {"snapshot": "web-nightly"}}));
    let filled = fill(&snap, &new, None).expect("filled");
    let disks = serde_json::to_value(&filled.disks).expect("json");
    assert_eq!(
        disks,
        json!([
            {"name": "root", "size": "40Gi", "accessMode": "ReadWriteOnce", "volumeMode": "Block",
             "source": {"snapshot": {"name": "vmsnapshot-1-volume-root"}}},
            {"name": "data", "size": "100Gi", "storageClass": "fast",
             "source": {"snapshot": {"name": "vmsnapshot-1-volume-data"}}}
        ])
    );
    assert_eq!(fill(&snap, &filled, None), Ok(filled.clone()));
    // A disk the snapshot holds no copy of (added to the Machine after it was taken).
    let partial = std::collections::BTreeMap::from([(
        "root".to_owned(),
        "vmsnapshot-1-volume-root".to_owned(),
    )]);
    let short = SourceMachine {
        copies: Copies::Snapshot {
            snapshot: "web-nightly",
            volumes: &partial,
        },
        ..source(&from)
    };
    let got: Vec<String> = (fill(&short, &new, None).expect_err("refused").iter())
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "spec.cloneFrom.snapshot: Forbidden: MachineSnapshot web-nightly holds no copy of disk \"data\" of Machine web"
        ]
    );
    // Both sources, or a malformed snapshot name.
    let both = spec(json!({"cloneFrom": {"machine": "web", "snapshot": "s"}}));
    let text: Vec<String> = errors(&both).iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        ["spec.cloneFrom: Forbidden: exactly one of machine or snapshot may be set, found both"]
    );
    let bad = spec(json!({"cloneFrom": {"snapshot": "S"}}));
    assert!(
        errors(&bad)[0]
            .to_string()
            .starts_with("spec.cloneFrom.snapshot: Invalid value: \"S\"")
    );
}
