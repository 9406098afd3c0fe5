use serde_json::json;

use crate::machine::names::{LABEL_MSG, SUBDOMAIN_MSG};
use crate::machine::update_rules::validate_update;
use crate::machine::validation::validate;
use crate::machine::{Catalog, resolve};

fn errors(spec: serde_json::Value) -> Vec<String> {
    let spec = serde_json::from_value(spec).expect("test spec");
    validate(&spec, &Catalog::default())
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn warnings(spec: serde_json::Value) -> Vec<String> {
    let spec = serde_json::from_value(spec).expect("test spec");
    validate(&spec, &Catalog::default()).warnings
}

fn disk_source(source: serde_json::Value) -> Vec<String> {
    errors(json!({"disks": [{"name": "root", "size": "10Gi", "source": source}]}))
}

#[test]
fn every_source_kind_alone_is_valid() {
    for source in [
        json!({"http": {"url": "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-generic-amd64.qcow2",
                        "secretRef": {"name": "creds"}, "certConfigMap": "ca-bundle"}}),
        json!({"http": {"url": "http://mirror.local/a.img"}}),
        json!({"registry": {"url": "docker://quay.io/containerdisks/fedora:40", "secretRef": {"name": "pull"}, "pullMethod": "node"}}),
        json!({"registry": {"url": "oci-archive://images/a.tar"}}),
        json!({"pvc": {"name": "golden-debian-12", "namespace": "os-images"}}),
        json!({"pvc": {"name": "golden"}}),
        json!({"dataSource": {"name": "debian-12", "namespace": "os-images"}}),
    ] {
        assert_eq!(
            disk_source(source.clone()),
            Vec::<String>::new(),
            "{source}"
        );
    }
}

#[test]
fn exactly_one_kind() {
    assert_eq!(
        disk_source(json!({})),
        [
            "spec.disks[0].source: Required value: exactly one of http, registry, pvc, dataSource, snapshot must be set"
        ]
    );
    assert_eq!(
        disk_source(json!({"http": {"url": "https://a/b"}, "pvc": {"name": "g"}})),
        [
            "spec.disks[0].source: Forbidden: exactly one of http, registry, pvc, dataSource, snapshot may be set, found http and pvc"
        ]
    );
}

#[test]
fn url_schemes() {
    let table = [
        (
            json!({"http": {"url": "ftp://a/b.iso"}}),
            r#"spec.disks[0].source.http.url: Invalid value: "ftp://a/b.iso": must start with http:// or https://"#,
        ),
        (
            json!({"http": {"url": "docker://quay.io/a"}}),
            r#"spec.disks[0].source.http.url: Invalid value: "docker://quay.io/a": must start with http:// or https://"#,
        ),
        (
            json!({"http": {"url": "https:///a.iso"}}),
            r#"spec.disks[0].source.http.url: Invalid value: "https:///a.iso": must name a host"#,
        ),
        (
            json!({"http": {"url": "https://a/b c.iso"}}),
            r#"spec.disks[0].source.http.url: Invalid value: "https://a/b c.iso": must not contain whitespace or control characters"#,
        ),
        (
            json!({"http": {"url": ""}}),
            "spec.disks[0].source.http.url: Required value: a URL starting with http:// or https://",
        ),
        (
            json!({"registry": {"url": "https://quay.io/a"}}),
            r#"spec.disks[0].source.registry.url: Invalid value: "https://quay.io/a": must start with docker:// or oci-archive://"#,
        ),
        (
            json!({"registry": {"url": "quay.io/containerdisks/fedora:40"}}),
            r#"spec.disks[0].source.registry.url: Invalid value: "quay.io/containerdisks/fedora:40": must start with docker:// or oci-archive://"#,
        ),
        (
            json!({"registry": {"url": "docker:///x"}}),
            r#"spec.disks[0].source.registry.url: Invalid value: "docker:///x": must name a host"#,
        ),
        (
            json!({"registry": {"url": "oci-archive://"}}),
            r#"spec.disks[0].source.registry.url: Invalid value: "oci-archive://": must name a host"#,
        ),
        (
            json!({"registry": {"url": ""}}),
            "spec.disks[0].source.registry.url: Required value: a URL starting with docker:// or oci-archive://",
        ),
        (
            json!({"registry": {"url": "docker://q/a", "pullMethod": "kubelet"}}),
            r#"spec.disks[0].source.registry.pullMethod: Unsupported value: "kubelet": supported values: "node", "pod""#,
        ),
    ];
    for (source, message) in table {
        assert_eq!(disk_source(source.clone()), [message], "{source}");
    }
    assert_eq!(
        disk_source(json!({"http": {"url": format!("https://a/{}", "x".repeat(2048))}})),
        ["spec.disks[0].source.http.url: Too long: may not be more than 2048 bytes"]
    );
    assert!(disk_source(json!({"http": {"url": "HTTPS://A/B"}})).is_empty());
    // Registry URLs: at most 2048 bytes, as documented.
    let registry_url = |len: usize| format!("docker://q/{}", "x".repeat(len - "docker://q/".len()));
    assert!(disk_source(json!({"registry": {"url": registry_url(2048)}})).is_empty());
    assert_eq!(
        disk_source(json!({"registry": {"url": registry_url(2049)}})),
        ["spec.disks[0].source.registry.url: Too long: may not be more than 2048 bytes"]
    );
}

#[test]
fn names_and_namespaces() {
    let e = disk_source(json!({"pvc": {"name": "Golden", "namespace": "OS_images"}}));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].starts_with(r#"spec.disks[0].source.pvc.name: Invalid value: "Golden": a lowercase RFC 1123 subdomain"#), "{e:?}");
    assert!(e[1].starts_with(r#"spec.disks[0].source.pvc.namespace: Invalid value: "OS_images": a lowercase RFC 1123 label"#), "{e:?}");
    assert_eq!(
        disk_source(json!({"dataSource": {"name": ""}})),
        [
            "spec.disks[0].source.dataSource.name: Required value: the name of the CDI DataSource to clone"
        ]
    );
    assert_eq!(
        disk_source(json!({"http": {"url": "https://a/b", "secretRef": {"name": ""}}})),
        [
            "spec.disks[0].source.http.secretRef.name: Required value: the name of a Secret in the Machine's namespace"
        ]
    );
    // Secret and DataSource names are DNS-1123 subdomains, namespaces DNS-1123 labels.
    let invalid = |field: &str, value: &str, message: &str| {
        format!("spec.disks[0].source.{field}: Invalid value: {value:?}: {message}")
    };
    assert_eq!(
        disk_source(json!({"registry": {"url": "docker://q/a", "secretRef": {"name": "Creds_"}}})),
        [invalid("registry.secretRef.name", "Creds_", SUBDOMAIN_MSG)]
    );
    assert_eq!(
        disk_source(json!({"dataSource": {"name": "Deb_12", "namespace": "os-images"}})),
        [invalid("dataSource.name", "Deb_12", SUBDOMAIN_MSG)]
    );
    assert_eq!(
        disk_source(json!({"dataSource": {"name": "debian-12", "namespace": "OS_Images"}})),
        [invalid("dataSource.namespace", "OS_Images", LABEL_MSG)]
    );
    // A valid subdomain is still no namespace.
    assert_eq!(
        disk_source(json!({"dataSource": {"name": "debian.12", "namespace": "os.images"}})),
        [invalid("dataSource.namespace", "os.images", LABEL_MSG)]
    );
    let e = disk_source(json!({"http": {"url": "https://a/b", "certConfigMap": "CA"}}));
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with(r#"spec.disks[0].source.http.certConfigMap: Invalid value: "CA""#));
}

#[test]
fn clones_need_no_size_imports_do() {
    assert!(
        errors(json!({"disks": [{"name": "data", "source": {"pvc": {"name": "g"}}}]})).is_empty()
    );
    assert!(
        errors(json!({"disks": [{"name": "data", "source": {"dataSource": {"name": "g"}}}]}))
            .is_empty()
    );
    assert_eq!(
        errors(json!({"disks": [{"name": "data", "source": {"http": {"url": "https://a/b"}}}]})),
        [
            r#"spec.disks[0].size: Required value: disk "data" is not in template "medium", so it needs a size"#
        ]
    );
    assert_eq!(
        errors(
            json!({"disks": [{"name": "data", "source": {"registry": {"url": "docker://q/a"}}}]})
        ),
        [
            r#"spec.disks[0].size: Required value: disk "data" is not in template "medium", so it needs a size"#
        ]
    );
    assert_eq!(
        errors(json!({"disks": [{"name": "data", "size": "0", "source": {"pvc": {"name": "g"}}}]})),
        [r#"spec.disks[0].size: Invalid value: "0": must be at least 1Mi"#]
    );
}

#[test]
fn cdroms() {
    assert!(errors(json!({"cdroms": [{"name": "installer", "source": {"http": {"url": "https://cdimage.debian.org/a.iso"}}}]})).is_empty());
    let e = errors(json!({"cdroms": [
        {"name": "root", "source": {"http": {"url": "https://a/b.iso"}}},
        {"name": "iso", "source": {"registry": {"url": "docker://a/b"}}},
        {"name": "iso", "source": {"pvc": {"name": "p"}}},
        {"name": "", "source": {}},
    ]}));
    assert_eq!(
        e,
        [
            r#"spec.cdroms[0].name: Invalid value: "root": a disk is already named "root"; disks and CD-ROMs share the claim names <machine>-<name>"#,
            r#"spec.cdroms[2].name: Duplicate value: "iso""#,
            "spec.cdroms[3].name: Required value",
            "spec.cdroms[3].source: Required value: exactly one of http, registry, pvc, dataSource, snapshot must be set",
        ]
    );
    // CD-ROM names are DNS-1123 labels (a dot, fine in a subdomain, is refused too).
    for name in ["ISO", "iso.v1"] {
        assert_eq!(
            errors(json!({"cdroms": [{"name": name, "source": {"pvc": {"name": "p"}}}]})),
            [format!(
                "spec.cdroms[0].name: Invalid value: {name:?}: {LABEL_MSG}"
            )],
        );
    }
    // KubeVirt refuses a VM with two volumes of one name; cloud-init's is "cloudinitdisk".
    assert_eq!(
        errors(json!({"cloudInit": {"userData": "#cloud-config\n"},
                      "cdroms": [{"name": "cloudinitdisk", "source": {"pvc": {"name": "p"}}}]})),
        [
            r#"spec.cdroms[0].name: Invalid value: "cloudinitdisk": is reserved for the cloud-init volume"#
        ]
    );
    assert_eq!(
        errors(json!({"cdroms": [{"name": "big", "size": "0", "source": {"pvc": {"name": "p"}}}]})),
        [r#"spec.cdroms[0].size: Invalid value: "0": must be at least 1Mi"#]
    );
    let five: Vec<_> = (0..5)
        .map(|i| json!({"name": format!("c{i}"), "source": {"pvc": {"name": "p"}}}))
        .collect();
    assert_eq!(
        errors(json!({"cdroms": five})),
        ["spec.cdroms: Too many: 5: must have at most 4 items"]
    );
}

#[test]
fn boot_order_cdrom_warns_only_without_a_cdrom() {
    assert_eq!(
        warnings(json!({"bootOrder": ["cdrom", "disk"]})),
        [r#"spec.bootOrder[0]: "cdrom" is accepted but ignored: the Machine has no cdrom device"#]
    );
    assert!(
        warnings(json!({"bootOrder": ["cdrom", "disk"],
        "cdroms": [{"name": "installer", "source": {"http": {"url": "https://a/b.iso"}}}]}))
        .is_empty()
    );
}

fn update(old: serde_json::Value, new: serde_json::Value) -> Vec<String> {
    let r = |j: serde_json::Value| {
        resolve(
            &serde_json::from_value(j).expect("spec"),
            None,
            &Catalog::default(),
        )
        .spec
    };
    validate_update(&r(old), &r(new), &[])
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn sources_are_immutable() {
    let http =
        json!({"disks": [{"name": "root", "source": {"http": {"url": "https://a/1.qcow2"}}}]});
    let other =
        json!({"disks": [{"name": "root", "source": {"http": {"url": "https://a/2.qcow2"}}}]});
    let blank = json!({"disks": [{"name": "root"}]});
    let message = |p: &str| {
        format!(
            "{p}: Forbidden: the source of disk \"root\" is immutable: CDI imports or clones a source once and never re-imports, so a changed source would not reach the disk; add a new disk or CD-ROM (or recreate the Machine) instead"
        )
    };
    assert_eq!(
        update(http.clone(), other),
        [message("spec.disks[0].source")]
    );
    assert_eq!(
        update(http.clone(), blank.clone()),
        [message("spec.disks[0].source")]
    );
    assert_eq!(
        update(blank, http.clone()),
        [message("spec.disks[0].source")]
    );
    assert!(update(http.clone(), http).is_empty());
}

#[test]
fn cdroms_come_and_go_but_keep_their_source() {
    let one = json!({"cdroms": [{"name": "iso", "source": {"http": {"url": "https://a/1.iso"}}}]});
    let two = json!({"cdroms": [{"name": "iso", "source": {"http": {"url": "https://a/1.iso"}}},
                                {"name": "drivers", "source": {"pvc": {"name": "virtio-win"}}}]});
    let changed =
        json!({"cdroms": [{"name": "iso", "source": {"http": {"url": "https://a/2.iso"}}}]});
    assert!(update(json!({}), one.clone()).is_empty());
    assert!(update(one.clone(), two.clone()).is_empty());
    assert!(update(two, json!({})).is_empty());
    let bigger = json!({"cdroms": [{"name": "iso", "size": "20Gi", "source": {"http": {"url": "https://a/1.iso"}}}]});
    let smaller = json!({"cdroms": [{"name": "iso", "size": "1Gi", "source": {"http": {"url": "https://a/1.iso"}}}]});
    assert!(update(one.clone(), bigger.clone()).is_empty());
    assert_eq!(
        update(bigger, smaller),
        [
            r#"spec.cdroms[0].size: Forbidden: CD-ROM "iso" may not shrink from 20Gi to 1Gi; claims can only grow"#
        ]
    );
    assert_eq!(
        update(one, changed),
        [
            "spec.cdroms[0].source: Forbidden: the source of CD-ROM \"iso\" is immutable: CDI imports or clones a source once and never re-imports, so a changed source would not reach the disk; add a new disk or CD-ROM (or recreate the Machine) instead"
        ]
    );
}

#[test]
fn a_clone_may_grow_past_its_source_size_but_never_drop_a_size() {
    let no_size = json!({"disks": [{"name": "data", "source": {"pvc": {"name": "g"}}}]});
    let sized =
        json!({"disks": [{"name": "data", "size": "50Gi", "source": {"pvc": {"name": "g"}}}]});
    assert!(update(no_size.clone(), sized.clone()).is_empty());
    assert_eq!(
        update(sized, no_size),
        [
            r#"spec.disks[1].size: Forbidden: disk "data" may not drop its size of 50Gi: disks can only grow"#
        ]
    );
}
