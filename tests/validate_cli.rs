//! The built binary: `validate -f` on the seed's example Machines (defaulted output, multiple
//! documents, standard input, field errors with exit 1) and `webhook` serving from PEM files.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde::Deserialize;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubevirt-operator");

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        // Defaults must come from the flags' own defaults, not from this machine's environment.
        .env_remove("DEFAULT_TEMPLATE")
        .env("LOG_FORMAT", "text")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write stdin");
    drop(pipe);
    child.wait_with_output().expect("binary finishes")
}

fn validate_file(path: &Path) -> Output {
    run(
        &["validate", "-f", path.to_str().expect("utf-8 path")],
        None,
    )
}

/// The Machines printed on standard output, in order.
fn documents(output: &Output) -> Vec<Value> {
    let text = String::from_utf8(output.stdout.clone()).expect("utf-8");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("stdout is YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        stderr(output)
    );
}

/// Admission leaves a disk's modes unset (the reconciler takes them from the StorageProfile).
fn disk(name: &str, size: &str) -> Value {
    json!({"name": name, "size": size})
}

fn cpu(cores: i64) -> Value {
    json!({"cores": cores, "threads": 1, "sockets": 1})
}

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

fn all_examples_stream() -> String {
    [
        "basic.yaml",
        "overrides.yaml",
        "networking.yaml",
        "cloud-init.yaml",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(example(f)).expect("example"))
    .collect::<Vec<_>>()
    .join("---\n")
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

const INVALID: &str = r#"
apiVersion: vitistack.io/v1alpha1
kind: Machine
metadata:
  name: broken-vm
  namespace: default
spec:
  template: huge
  resources:
    cpu:
      cores: 300
  disks:
    - name: root
      size: 40Gi
    - name: data
      size: 10Gi
      accessMode: ReadWriteAll
"#;

#[test]
fn an_invalid_file_prints_every_field_error_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.yaml");
    std::fs::write(&path, INVALID).unwrap();
    let output = validate_file(&path);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    for expected in [
        r#"spec.disks[1].accessMode: Unsupported value: "ReadWriteAll": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce""#,
        r#"spec.template: Unsupported value: "huge": supported values: "large", "medium", "small""#,
        "spec.resources.cpu.cores: Invalid value: 300",
        "broken-vm",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
    assert!(documents(&output).is_empty(), "nothing valid to print");
}

#[test]
fn a_stream_with_one_invalid_machine_exits_1_and_still_reports_the_valid_ones() {
    let stream = format!("{}---{INVALID}", all_examples_stream());
    let output = run(&["validate", "-f", "-"], Some(&stream));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(documents(&output).len(), 4);
    assert!(stderr(&output).contains("spec.disks[1].accessMode"));
}

/// `vitistack.io/retain-disks` is read as `"true"` or nothing: any other value would quietly
/// mean "delete the disks", so it is refused offline as by the webhook.
#[test]
fn retain_disks_other_than_true_or_false_is_refused() {
    let machine = |value: &str| {
        format!(
            r#"{{"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {{"name": "keeper", "annotations": {{"vitistack.io/retain-disks": "{value}"}}}}}}"#
        )
    };
    for value in ["True", "yes", ""] {
        let output = run(&["validate", "-f", "-"], Some(&machine(value)));
        assert_eq!(
            output.status.code(),
            Some(1),
            "{value:?}: {}",
            stderr(&output)
        );
        let expected = format!(
            r#"metadata.annotations[vitistack.io/retain-disks]: Unsupported value: "{value}": supported values: "false", "true""#
        );
        assert!(stderr(&output).contains(&expected), "{}", stderr(&output));
    }
    for value in ["true", "false"] {
        assert_ok(&run(&["validate", "-f", "-"], Some(&machine(value))));
    }
}

#[test]
fn warnings_go_to_stderr_and_do_not_fail() {
    let machine = r#"{"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "warned"}, "spec": {"bootOrder": ["cdrom", "disk"]}}"#;
    let output = run(&["validate", "-f", "-"], Some(machine));
    assert_ok(&output);
    assert!(stderr(&output).contains("cdrom"), "{}", stderr(&output));
    assert_eq!(documents(&output).len(), 1);
}

#[test]
fn unreadable_or_foreign_input_fails_with_a_message() {
    let missing = validate_file(Path::new("/nonexistent/machine.yaml"));
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("/nonexistent/machine.yaml"));

    let garbage = run(&["validate", "-f", "-"], Some("spec: [unclosed"));
    assert!(!garbage.status.success());
    assert!(
        stderr(&garbage).contains("not YAML or JSON"),
        "{}",
        stderr(&garbage)
    );

    let pod = run(
        &["validate", "-f", "-"],
        Some("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"),
    );
    assert_eq!(pod.status.code(), Some(1));
    assert!(stderr(&pod).contains("not a vitistack.io/v1alpha1 Machine"));
}

/// `webhook --cert-file --key-file --listen 127.0.0.1:0` serves verified HTTPS and stops on
/// SIGTERM. The port comes from its start-up log line.
#[tokio::test]
async fn webhook_subcommand_serves_the_pem_pair_and_stops_on_sigterm() {
    let ca = common::TestCa::new("cli CA");
    let mut webhook = common::WebhookProcess::start(&ca);
    let addr = webhook.addr;

    let url = format!(
        "https://{addr}{}",
        kubevirt_operator::admission::MUTATE_PATH
    );
    let response = ca
        .reqwest_client()
        .post(url)
        .json(&common::valid_review("cli"))
        .send()
        .await
        .expect("verified HTTPS request");
    assert_eq!(response.status(), 200);
    let review: Value = response.json().await.unwrap();
    assert_eq!(review["response"]["uid"], "cli");
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(review["response"]["patchType"], "JSONPatch");

    webhook.sigterm();
    let status = webhook.wait_for_exit("webhook did not stop on SIGTERM");
    assert!(status.success(), "clean exit on SIGTERM, got {status:?}");
}

#[test]
fn validate_knows_eviction_and_placement_offline() {
    let out = validate_file(&example("migratable.yaml"));
    assert_ok(&out);
    let doc = &documents(&out)[0];
    assert_eq!(doc["spec"]["evictionStrategy"], "LiveMigrate");
    assert_eq!(doc["spec"]["placement"]["priorityClassName"], "vm-high");
    let bad = "apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: m}\n\
               spec: {evictionStrategy: Sometimes, placement: {tolerations: [{key: k, effect: NoRun}]}}\n";
    let out = run(&["validate", "-f", "-"], Some(bad));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("spec.evictionStrategy")
            && err.contains("spec.placement.tolerations[0].effect"),
        "{err}"
    );
}

#[test]
fn validate_knows_run_update_strategies_and_hot_plug_maxima_offline() {
    let out = validate_file(&example("operated.yaml"));
    assert_ok(&out);
    let doc = &documents(&out)[0];
    assert_eq!(doc["spec"]["updateStrategy"], "Restart");
    assert_eq!(doc["spec"]["resources"]["cpu"]["maxSockets"], 8);
    assert_eq!(doc["spec"]["resources"]["memory"]["maxSize"], "16Gi");
    let bad = "apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: m}\n\
               spec: {updateStrategy: Often, resources: {cpu: {sockets: 4, maxSockets: 2}, memory: {size: 4Gi, maxSize: 2Gi}}}\n";
    let out = run(&["validate", "-f", "-"], Some(bad));
    assert!(!out.status.success());
    let err = stderr(&out);
    for field in [
        "spec.updateStrategy",
        "spec.resources.cpu.sockets: Invalid value: 4: must be at most spec.resources.cpu.maxSockets (2)",
        "spec.resources.memory.size: Invalid value: \"4Gi\": must be at most spec.resources.memory.maxSize (2Gi)",
    ] {
        assert!(err.contains(field), "{field}: {err}");
    }
}
