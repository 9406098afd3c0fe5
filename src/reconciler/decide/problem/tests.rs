use super::*;

fn all() -> Vec<Problem> {
    let kinds = [
        Kind::Claim,
        Kind::VirtualMachine,
        Kind::Attachment,
        Kind::Secret,
        Kind::DataVolume,
        Kind::ConfigMap,
    ];
    let mut v = vec![
        Problem::InvalidSpec {
            template_not_found: true,
            message: "m".into(),
        },
        Problem::InvalidSpec {
            template_not_found: false,
            message: "m".into(),
        },
        Problem::StorageClassNotFound {
            disk: "d".into(),
            storage_class: "s".into(),
        },
        Problem::NetworkConfigurationNotFound {
            network: "n".into(),
            network_name: "nn".into(),
        },
        Problem::NetworkInvalid {
            network_name: "n".into(),
            message: "m".into(),
        },
        Problem::MultusNotInstalled,
        Problem::CdiNotInstalled {
            volumes: vec!["disk root".into()],
        },
        Problem::SecretNotFound { name: "s".into() },
        Problem::SecretKeyNotFound {
            name: "s".into(),
            key: "k".into(),
        },
    ];
    for kind in kinds {
        v.push(Problem::Conflict {
            kind,
            name: "x".into(),
        });
    }
    for fault in [
        DataSourceFault::Missing,
        DataSourceFault::NotReady,
        DataSourceFault::CrossNamespace {
            namespace: "os".into(),
        },
    ] {
        v.push(Problem::DataSourceUnusable {
            field: "spec.disks[0].source.dataSource".into(),
            data_source: "team/golden".into(),
            cluster: "dc1".into(),
            fault,
        });
    }
    v.push(Problem::CloneUnauthorized {
        name: "x".into(),
        message: "m".into(),
    });
    v.push(Problem::CloneSourceNotPinned {
        volume: "disk root".into(),
    });
    v.push(Problem::ReleaseFailed {
        kind: Kind::Claim,
        name: "x".into(),
        message: "m".into(),
    });
    for kind in kinds {
        v.push(Problem::WriteFailed {
            kind,
            name: "x".into(),
            message: "m".into(),
        });
    }
    v
}

#[test]
fn every_reason_is_listed_once() {
    let reasons: Vec<&str> = all().iter().map(Problem::reason).collect();
    assert_eq!(reasons, Problem::REASONS);
}

#[test]
fn conflicts_follow_the_shared_vocabulary() {
    let c = |kind| Problem::Conflict {
        kind,
        name: "a-b-root".into(),
    };
    let claim = c(Kind::Claim);
    assert_eq!(
        (claim.reason(), claim.condition()),
        ("ClaimConflict", condition::STORAGE_READY)
    );
    assert_eq!(
        claim.to_string(),
        "PersistentVolumeClaim a-b-root exists and is not controlled by this Machine"
    );
    let vm = c(Kind::VirtualMachine);
    assert_eq!(
        (vm.reason(), vm.condition()),
        ("VirtualMachineConflict", condition::VIRTUAL_MACHINE_READY)
    );
    let nad = c(Kind::Attachment);
    assert_eq!(
        (nad.reason(), nad.condition()),
        ("NetworkAttachmentConflict", condition::NETWORK_READY)
    );
    let secret = c(Kind::Secret);
    assert_eq!(
        (secret.reason(), secret.condition()),
        ("SecretConflict", condition::VIRTUAL_MACHINE_READY)
    );
    let ca = c(Kind::ConfigMap);
    assert_eq!(
        (ca.reason(), ca.condition()),
        ("ConfigMapConflict", condition::STORAGE_READY)
    );
}
