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

/// The tests, by subject, in tests/validate_cli/ (still one test binary).
mod validate_cli {
    mod examples;
    mod offline;
    mod refusals;
}

/// `validate -f` knows issue 35's fields: a NetworkConfiguration's ipam is checked, and hands
/// out addresses from its ranges to the Machines after it; an address held by an earlier
/// document is refused naming it, one outside the subnet naming the field.
#[test]
fn validate_hands_out_and_checks_addresses_among_the_documents() {
    let stream = r#"
apiVersion: vitistack.io/v1alpha1
kind: NetworkConfiguration
metadata: {name: lab, namespace: default}
spec: {bridge: br0, ipam: {subnet: 10.9.0.0/24, gateway: 10.9.0.1, ranges: [{start: 10.9.0.10, end: 10.9.0.20}]}}
---
apiVersion: vitistack.io/v1alpha1
kind: Machine
metadata: {name: given, namespace: default}
spec: {template: small, networks: [{name: eth0, networkName: lab}]}
---
apiVersion: vitistack.io/v1alpha1
kind: Machine
metadata: {name: asking, namespace: default}
spec: {template: small, networks: [{name: eth0, networkName: lab, addresses: [10.9.0.10/24]}]}
---
apiVersion: vitistack.io/v1alpha1
kind: Machine
metadata: {name: outside, namespace: default}
spec: {template: small, networks: [{name: eth0, networkName: lab, addresses: [10.8.0.5/24]}]}
"#;
    let out = run(&["validate", "-f", "-"], Some(stream));
    assert!(!out.status.success());
    let docs = documents(&out);
    assert_eq!(
        docs.len(),
        2,
        "the network and one Machine pass: {}",
        stderr(&out)
    );
    assert_eq!(
        docs[1]["spec"]["networks"][0]["addresses"],
        serde_json::json!(["10.9.0.10/24"])
    );
    let err = stderr(&out);
    assert!(
        err.contains(r#"spec.networks[0].addresses[0]: Duplicate value: "10.9.0.10/24": already used on NetworkConfiguration lab by Machine default/given"#),
        "{err}"
    );
    assert!(err.contains("is outside the subnet 10.9.0.0/24"), "{err}");
    let bad = stream.replace("end: 10.9.0.20", "end: 10.9.1.20");
    let out = run(&["validate", "-f", "-"], Some(&bad));
    assert!(
        stderr(&out).contains("spec.ipam.ranges[0].end"),
        "{}",
        stderr(&out)
    );
}
