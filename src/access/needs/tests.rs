use serde_json::json;

use super::*;

fn with_ref(name: &str, key: Option<&str>) -> Value {
    let mut r = json!({"name": name});
    if let Some(k) = key {
        r["key"] = json!(k);
    }
    json!({"metadata": {"name": "m"}, "spec": {"cloudInit": {"secretRef": r}}})
}

/// (verb, resource, namespace/name)
type Needed = Vec<(String, String, String)>;

fn needed(old: Option<&Value>, new: &Value) -> Needed {
    machine_needs(&Change {
        namespace: "team-a",
        old,
        new,
        existing_claims: &BTreeSet::new(),
        data_sources: &BTreeMap::new(),
    })
    .into_iter()
    .map(|p| (p.resource_path(), p))
    .map(|(r, p)| (p.verb, r, format!("{}/{}", p.namespace, p.name)))
    .collect()
}

#[test]
fn secret_ref_needs_get_on_create_and_on_changed_updates_only() {
    let boot = with_ref("boot", None);
    let get_boot = vec![("get".into(), "secrets".into(), "team-a/boot".into())];
    let none = json!({"spec": {"cpu": {"cores": 2}}});
    let cases: &[(&str, Option<&Value>, &Value, Needed)] = &[
        ("create with a reference", None, &boot, get_boot.clone()),
        ("create without", None, &none, vec![]),
        (
            "update, nothing the guest sees changed",
            Some(&boot),
            &boot,
            vec![],
        ),
        (
            "update, other Secret",
            Some(&boot),
            &with_ref("other", None),
            vec![("get".into(), "secrets".into(), "team-a/other".into())],
        ),
        (
            "update, other key",
            Some(&boot),
            &with_ref("boot", Some("cfg")),
            get_boot.clone(),
        ),
        (
            "update, reference added",
            Some(&none),
            &boot,
            get_boot.clone(),
        ),
        ("update, reference removed", Some(&boot), &none, vec![]),
        (
            "update, cpu only: the guest sees the same",
            Some(&boot),
            &{
                let mut b = boot.clone();
                b["spec"]["resources"] = json!({"cpu": {"cores": 4}});
                b
            },
            vec![],
        ),
        (
            "empty name (validation refuses it)",
            None,
            &with_ref("", None),
            vec![],
        ),
    ];
    for (what, old, new, want) in cases {
        assert_eq!(&needed(*old, new), want, "{what}");
    }
}

#[test]
fn new_disk_sources_need_cdis_clone_right_and_their_credentials() {
    let clone = json!({"spec": {"disks": [
        {"name": "root", "source": {"pvc": {"name": "golden", "namespace": "os-images"}}}],
        "cdroms": [{"name": "iso", "source": {"http": {"url": "https://a/b.iso",
            "secretRef": {"name": "creds"}}}}]}});
    let fields = |old: Option<&Value>, new: &Value| -> Vec<(String, String, String)> {
        machine_needs(&Change {
            namespace: "team-a",
            old,
            new,
            existing_claims: &BTreeSet::new(),
            data_sources: &BTreeMap::new(),
        })
        .into_iter()
        .map(|p| (p.field.clone(), p.verb.clone(), p.resource_path()))
        .collect()
    };
    assert_eq!(
        fields(None, &clone),
        [
            (
                "spec.disks[0].source.pvc.namespace".to_owned(),
                "create".to_owned(),
                "datavolumes/source".to_owned()
            ),
            (
                "spec.cdroms[0].source.http.secretRef.name".to_owned(),
                "get".to_owned(),
                "secrets".to_owned()
            ),
        ]
    );
    // Nothing the guest sees changed (labels edited, say): not asked again.
    assert!(fields(Some(&clone), &clone).is_empty());
    // A same-namespace clone needs CDI's right too: the operator creates the DataVolume.
    let same_ns = json!({"spec": {"disks": [
        {"name": "root", "source": {"pvc": {"name": "golden"}}}]}});
    assert_eq!(fields(None, &same_ns).len(), 1);
}

#[test]
fn a_write_changing_what_the_guest_sees_rechecks_every_reference() {
    // A dormant secretRef (inline userData wins), a clone, and a CD-ROM's credentials.
    let stored = json!({"metadata": {"name": "m"}, "spec": {
        "cloudInit": {"userData": "#cloud-config", "secretRef": {"name": "db-password"}},
        "disks": [{"name": "root", "source": {"pvc": {"name": "golden", "namespace": "os"}}}]}});
    let asked = |new: &Value| -> Vec<String> {
        machine_needs(&Change {
            namespace: "team-a",
            old: Some(&stored),
            new,
            existing_claims: &BTreeSet::new(),
            data_sources: &BTreeMap::new(),
        })
        .iter()
        .map(|p| {
            format!(
                "{} {} {}/{}",
                p.verb,
                p.resource_path(),
                p.namespace,
                p.name
            )
        })
        .collect()
    };
    let every = [
        "get secrets team-a/db-password",
        "create datavolumes/source os/golden",
    ];
    // Inline userData removed: the dormant Secret takes effect.
    let mut activated = stored.clone();
    activated["spec"]["cloudInit"] = json!({"secretRef": {"name": "db-password"}});
    assert_eq!(asked(&activated), every);
    // A CD-ROM added and booted first, beside the Secret and the cloned disk.
    let mut cdrom = stored.clone();
    cdrom["spec"]["cdroms"] =
        json!([{"name": "mine", "source": {"http": {"url": "https://a/b.iso"}}}]);
    cdrom["spec"]["bootOrder"] = json!(["cdrom", "disk"]);
    assert_eq!(asked(&cdrom), every);
    // Boot order alone.
    let mut boot = stored.clone();
    boot["spec"]["bootOrder"] = json!(["network", "disk"]);
    assert_eq!(asked(&boot), every);
    // What a dataSource volume clones, re-pinned: as much what the guest sees as its disks.
    let mut repinned = stored.clone();
    repinned["metadata"]["annotations"] =
        json!({crate::api::names::CLONE_SOURCES_ANNOTATION: "{}"});
    assert_eq!(asked(&repinned), every);
    // CPU and memory only: nothing the guest boots or sees.
    let mut cpu = stored.clone();
    cpu["spec"]["resources"] = json!({"cpu": {"cores": 8}});
    assert!(asked(&cpu).is_empty());
}

#[test]
fn an_existing_claim_of_a_new_disk_needs_update_and_delete_named() {
    let db = json!({"metadata": {"name": "db"},
        "spec": {"disks": [{"name": "root"}, {"name": "data", "size": "1Gi"}]}});
    let existing: BTreeSet<String> = ["db-data".to_owned()].into();
    let change = Change {
        namespace: "team-a",
        old: None,
        new: &db,
        existing_claims: &existing,
        data_sources: &BTreeMap::new(),
    };
    let candidates: Vec<String> = claim_candidates(&change)
        .into_iter()
        .map(|c| c.claim)
        .collect();
    assert_eq!(candidates, ["db-root", "db-data"]);
    let denials: Vec<String> = machine_needs(&change)
        .iter()
        .map(|p| {
            let denial = super::super::Denial {
                user: "bob",
                permission: p,
                cluster: None,
            };
            format!("{}: {denial}", p.field)
        })
        .collect();
    assert_eq!(
        denials,
        [
            r#"spec.disks[1]: user "bob" cannot update persistentvolumeclaims "db-data" in namespace "team-a", which exists and would be adopted by this disk"#,
            r#"spec.disks[1]: user "bob" cannot delete persistentvolumeclaims "db-data" in namespace "team-a", which exists and would be adopted by this disk"#,
        ]
    );
    // Kept on UPDATE: asked when it was added, not again.
    let kept = Change {
        old: Some(&db),
        ..change
    };
    assert!(claim_candidates(&kept).is_empty() && machine_needs(&kept).is_empty());
}

#[test]
fn denial_names_verb_resource_and_namespace_only() {
    let p = &machine_needs(&Change {
        namespace: "team-a",
        old: None,
        new: &with_ref("db-password", Some("k")),
        existing_claims: &BTreeSet::new(),
        data_sources: &BTreeMap::new(),
    })[0];
    let text = super::super::Denial {
        user: "bob",
        permission: p,
        cluster: None,
    }
    .to_string();
    assert_eq!(
        text,
        r#"user "bob" cannot get secrets in namespace "team-a""#
    );
    assert!(!text.contains("db-password"));
    let cdi = Permission {
        group: "cdi.kubevirt.io".into(),
        resource: "datavolumes".into(),
        subresource: "source".into(),
        verb: "create".into(),
        ..p.clone()
    };
    assert_eq!(
        super::super::Denial {
            user: "bob",
            permission: &cdi,
            cluster: None,
        }
        .to_string(),
        // A clone source is named: the author named it, and CDI's refusal names it too.
        r#"user "bob" cannot create datavolumes/source.cdi.kubevirt.io "db-password" in namespace "team-a""#
    );
}
