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
