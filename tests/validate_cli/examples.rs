//! The shipped examples, offline: what each becomes, alone and streamed.

#[allow(unused_imports)]
use crate::*;
use serde_json::{Value, json};

#[test]
fn basic_example_gets_the_medium_template() {
    let output = validate_file(&example("basic.yaml"));
    assert_ok(&output);
    let machines = documents(&output);
    assert_eq!(machines.len(), 1);
    let spec = &machines[0]["spec"];
    assert_eq!(machines[0]["metadata"]["name"], "basic-vm");
    assert_eq!(spec["template"], "medium");
    assert_eq!(spec["resources"]["cpu"], cpu(2));
    assert_eq!(spec["resources"]["memory"]["size"], "4Gi");
    assert_eq!(spec["disks"], json!([disk("root", "40Gi")]));
    assert_eq!(spec["running"], true);
    assert_eq!(spec["domain"]["machine"]["type"], "pc-q35");
}

#[test]
fn overrides_example_merges_field_by_field_and_disks_by_name() {
    let output = validate_file(&example("overrides.yaml"));
    assert_ok(&output);
    let spec = &documents(&output)[0]["spec"];
    // template small + cores 4 + 8Gi + disk data 100Gi fast-ssd
    assert_eq!(spec["resources"]["cpu"], cpu(4));
    assert_eq!(spec["resources"]["memory"]["size"], "8Gi");
    let mut data = disk("data", "100Gi");
    data["storageClass"] = json!("fast-ssd");
    assert_eq!(spec["disks"], json!([disk("root", "20Gi"), data]));
}

#[test]
fn networking_example_keeps_both_nics() {
    let output = validate_file(&example("networking.yaml"));
    assert_ok(&output);
    let spec = &documents(&output)[0]["spec"];
    assert_eq!(
        spec["networks"],
        json!([
            {"name": "eth0", "networkName": "prod-network", "model": "virtio"},
            {"name": "eth1", "networkName": "storage-network", "model": "virtio"}
        ])
    );
    assert_eq!(spec["resources"]["cpu"], cpu(2));
}

#[test]
fn cloud_init_example_keeps_user_data_verbatim() {
    let output = validate_file(&example("cloud-init.yaml"));
    assert_ok(&output);
    let spec = &documents(&output)[0]["spec"];
    assert_eq!(spec["resources"]["cpu"], cpu(4));
    assert_eq!(spec["resources"]["memory"]["size"], "8Gi");
    assert_eq!(spec["disks"], json!([disk("root", "80Gi")]));
    let source: Value =
        serde_yaml::from_str(&std::fs::read_to_string(example("cloud-init.yaml")).unwrap())
            .unwrap();
    assert_eq!(
        spec["cloudInit"]["userData"],
        source["spec"]["cloudInit"]["userData"]
    );
    assert!(
        spec["cloudInit"]["userData"]
            .as_str()
            .unwrap()
            .starts_with("#cloud-config\n")
    );
}

#[test]
fn multi_document_input_from_stdin_is_checked_document_by_document() {
    let output = run(&["validate", "-f", "-"], Some(&all_examples_stream()));
    assert_ok(&output);
    let names: Vec<Value> = documents(&output)
        .iter()
        .map(|m| m["metadata"]["name"].clone())
        .collect();
    assert_eq!(
        names,
        json!(["basic-vm", "custom-vm", "networked-vm", "cloud-init-vm"])
            .as_array()
            .unwrap()
            .clone()
    );
}

#[test]
fn the_disk_image_examples_validate_offline_and_keep_their_sources() {
    for (file, path, expected) in [
        (
            "debian-http.yaml",
            "/spec/disks/0/source/http/url",
            "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-generic-amd64.qcow2",
        ),
        (
            "registry-containerdisk.yaml",
            "/spec/disks/0/source/registry/url",
            "docker://quay.io/containerdisks/fedora:40",
        ),
        (
            "golden-clone.yaml",
            "/spec/disks/0/source/dataSource/namespace",
            "os-images",
        ),
        (
            "golden-clone.yaml",
            "/spec/disks/0/source/dataSource/name",
            "debian-12",
        ),
        ("installer-iso.yaml", "/spec/cdroms/0/name", "installer"),
        ("installer-iso.yaml", "/spec/bootOrder/0", "cdrom"),
    ] {
        let output = validate_file(&example(file));
        assert_ok(&output);
        let docs = documents(&output);
        assert_eq!(docs.len(), 1, "{file}");
        assert_eq!(docs[0].pointer(path), Some(&json!(expected)), "{file}");
    }
    // The clone keeps no size: CDI takes the golden image's.
    let clone = documents(&validate_file(&example("golden-clone.yaml")));
    assert!(clone[0].pointer("/spec/disks/0/size").is_none());
    // The installer boots the ISO it names (the Debian version in the URL may move on).
    let installer = documents(&validate_file(&example("installer-iso.yaml")));
    let iso = installer[0].pointer("/spec/cdroms/0/source/http/url");
    assert!(
        iso.and_then(|u| u.as_str())
            .is_some_and(|u| u.starts_with("https://") && u.ends_with("netinst.iso")),
        "{iso:?}"
    );
    let broken = r#"{"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine", "metadata": {"name": "b"},
        "spec": {"disks": [{"name": "data", "size": "1Gi", "source": {"registry": {"url": "https://quay.io/a"}}}]}}"#;
    let output = run(&["validate", "-f", "-"], Some(broken));
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains(r#"spec.disks[0].source.registry.url: Invalid value: "https://quay.io/a": must start with docker:// or oci-archive://"#), "{}", stderr(&output));
}

#[test]
fn stdin_and_file_give_the_same_output_and_the_output_is_a_fixed_point() {
    let from_file = validate_file(&example("overrides.yaml"));
    let text = std::fs::read_to_string(example("overrides.yaml")).unwrap();
    let from_stdin = run(&["validate", "-f", "-"], Some(&text));
    assert_ok(&from_stdin);
    assert_eq!(from_file.stdout, from_stdin.stdout);
    // Feeding the defaulted Machine back changes nothing: the mutation is idempotent.
    let again = run(
        &["validate", "-f", "-"],
        Some(&String::from_utf8(from_file.stdout.clone()).unwrap()),
    );
    assert_ok(&again);
    assert_eq!(documents(&again), documents(&from_file));
}
