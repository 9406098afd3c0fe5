//! Network attachments through `decide`: ownership, Multus missing, and the unused ones deleted.

use super::*;

#[test]
fn attachments() {
    // (existing attachment: (controller uid, labelled managed-by), writable)
    type Live = Option<(Option<&'static str>, bool)>;
    let cases: [(Live, bool); 5] = [
        (None, true),
        (Some((Some("uid-nc"), true)), true),
        (Some((Some("uid-nc"), false)), false), // controlled by the NC, not labelled ours
        (Some((Some("uid-other"), true)), false),
        (Some((None, false)), false), // made by someone else
    ];
    for (i, (live, writable)) in cases.into_iter().enumerate() {
        let mut o = observed(machine(
            "m",
            json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lan"}]}),
        ));
        if let Some((controller, managed)) = live {
            let mut m = meta("", "lan", controller, None);
            if managed {
                m.labels = Some(BTreeMap::from([(
                    MANAGED_BY_LABEL.to_owned(),
                    MANAGED_BY.to_owned(),
                )]));
            }
            o.attachments.insert(
                "lan".into(),
                NetworkAttachmentDefinition {
                    metadata: m,
                    spec: NetworkAttachmentDefinitionSpec::default(),
                },
            );
        }
        let d = decide(&o, &lan_catalog(), &key());
        assert_eq!(d.attachments.len(), usize::from(writable), "case {i}");
        assert_eq!(d.vm.is_some(), writable, "case {i}");
        if !writable {
            assert_eq!(reasons(&d), ["NetworkAttachmentConflict"], "case {i}");
        }
    }
}

#[test]
fn without_multus_only_machines_with_networks_wait() {
    let mut o = observed(machine(
        "m",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lan"}]}),
    ));
    o.multus_installed = false;
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(reasons(&d), ["MultusNotInstalled"]);
    assert!(d.vm.is_none() && d.attachments.is_empty());

    let mut plain = observed(machine("p", json!({"template": "small"})));
    plain.multus_installed = false;
    let d = decide(&plain, &Catalog::default(), &key());
    assert!(d.problems.is_empty() && d.vm.is_some());
}

#[test]
fn only_our_unused_attachments_are_deleted() {
    let mut o = observed(machine("m", json!({"template": "small"})));
    let nad = |name: &str, controller: Option<&str>| {
        let mut m = meta("", name, controller, None);
        m.labels = Some(BTreeMap::from([(
            MANAGED_BY_LABEL.to_owned(),
            MANAGED_BY.to_owned(),
        )]));
        NetworkAttachmentDefinition {
            metadata: m,
            spec: NetworkAttachmentDefinitionSpec::default(),
        }
    };
    // `lan` is controlled by its NetworkConfiguration; `other` by something else.
    o.unused_attachments = vec![nad("lan", Some("uid-nc")), nad("other", Some("uid-x"))];
    let d = decide(&o, &Catalog::default(), &key());
    let deleted: Vec<String> = d.delete_attachments.iter().map(|n| n.name_any()).collect();
    assert_eq!(deleted, ["lan"]);
}
