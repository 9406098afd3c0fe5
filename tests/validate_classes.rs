//! The built binary: `validate -f` with MachineClasses in its input, next to Machines. The
//! classes are checked as their webhook would (one default at most), and the Machines anywhere in
//! the input are sized and bounded by them, so CI can check Machines against a cluster's classes
//! without the cluster.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde::Deserialize;
use serde_json::{Value, json};

fn validate(stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
        .args(["validate", "-f", "-"])
        .env_remove("DEFAULT_TEMPLATE")
        .env("LOG_FORMAT", "text")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.as_bytes()).expect("write stdin");
    drop(pipe);
    child.wait_with_output().expect("binary finishes")
}

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

fn class(name: &str, spec: Value) -> String {
    let doc = json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "MachineClass",
                     "metadata": {"name": name}, "spec": spec});
    serde_yaml::to_string(&doc).expect("yaml")
}

fn machine(name: &str, spec: Value) -> String {
    let doc = json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                     "metadata": {"name": name}, "spec": spec});
    serde_yaml::to_string(&doc).expect("yaml")
}

fn stream(docs: &[String]) -> String {
    docs.join("---\n")
}

#[test]
fn the_example_class_sizes_its_machine() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/machine-class.yaml");
    let output = validate(&std::fs::read_to_string(path).expect("example"));
    assert!(output.status.success(), "{}", stderr(&output));
    let docs = documents(&output);
    assert_eq!(
        docs[0]["kind"], "MachineClass",
        "the class is printed as given"
    );
    assert_eq!(docs[0]["metadata"]["name"], "xlarge");
    let spec = &docs[1]["spec"];
    assert_eq!(
        spec["resources"]["cpu"],
        json!({"cores": 8, "threads": 1, "sockets": 1})
    );
    assert_eq!(spec["resources"]["memory"]["size"], "48Gi");
    assert_eq!(spec["disks"][0]["size"], "100Gi");
    assert_eq!(spec["disks"][1]["name"], "data");
    let record = docs[1]["metadata"]["annotations"]["vitistack.io/machine-class"]
        .as_str()
        .expect("the class record");
    assert!(
        record.starts_with(r#"{"name":"xlarge","cpu":{"cores":4"#),
        "{record}"
    );
}

#[test]
fn machines_are_checked_against_classes_anywhere_in_the_input() {
    let xlarge = class(
        "xlarge",
        json!({"cpu": {"cores": 4}, "memory": {"size": "48Gi"},
               "limits": {"cpu": {"maxCores": 16}}}),
    );
    // The Machine comes first: classes are read before any Machine is checked.
    let input = stream(&[
        machine(
            "over",
            json!({"template": "xlarge", "resources": {"cpu": {"cores": 32}}}),
        ),
        machine("fine", json!({"template": "xlarge"})),
        xlarge,
        machine("unknown", json!({"template": "huge"})),
    ]);
    let output = validate(&input);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains(r#"Machine.vitistack.io "over" is invalid: spec.resources.cpu.cores: Invalid value: 32: must be at most 16: limits.cpu.maxCores of MachineClass "xlarge""#),
        "{err}"
    );
    assert!(
        err.contains(r#"spec.template: Unsupported value: "huge": supported values: "large", "medium", "small", "xlarge""#),
        "{err}"
    );
    let docs = documents(&output);
    let names: Vec<&str> = docs
        .iter()
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["fine", "xlarge"], "the valid documents, in order");
    assert_eq!(docs[0]["spec"]["resources"]["cpu"]["cores"], 4);
}

#[test]
fn invalid_classes_and_a_second_default_are_refused() {
    let sized = json!({"cpu": {"cores": 2}, "memory": {"size": "8Gi"}, "default": true});
    let input = stream(&[
        class("first", sized.clone()),
        class("second", sized),
        class("broken", json!({"memory": {"size": "8Gi"}})),
        machine("vm", json!({"template": "broken"})),
        machine("defaulted", json!({})),
    ]);
    let output = validate(&input);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    for expected in [
        r#"MachineClass.vitistack.io "second" is invalid: spec.default: Forbidden: at most one MachineClass may be the default, and first already is"#,
        r#"MachineClass.vitistack.io "broken" is invalid: spec.cpu.cores: Required value"#,
        r#"Machine.vitistack.io "vm" is invalid: spec.template: Unsupported value: "broken""#,
    ] {
        assert!(err.contains(expected), "{expected}\n{err}");
    }
    let docs = documents(&output);
    let defaulted = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "defaulted")
        .expect("admitted");
    assert_eq!(
        defaulted["spec"]["template"], "first",
        "the input's default class"
    );
}

#[test]
fn without_classes_in_the_input_the_built_ins_alone() {
    let output = validate(&machine("vm", json!({"template": "large"})));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        documents(&output)[0]["spec"]["resources"]["cpu"]["cores"],
        4
    );
}

/// Issue 35: `validate -f` knows a class's hardware: the example's GPU class is accepted and
/// recorded in its Machine with its devices; a class's bad hardware and a Machine asking for
/// devices or CPU settings of its own are refused naming each field.
#[test]
fn the_gpu_example_and_hardware_refusals() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gpu-class.yaml");
    let output = validate(&std::fs::read_to_string(path).expect("example"));
    assert!(output.status.success(), "{}", stderr(&output));
    let docs = documents(&output);
    let record: Value = serde_json::from_str(
        docs[1]["metadata"]["annotations"]["vitistack.io/machine-class"]
            .as_str()
            .expect("the class record"),
    )
    .expect("JSON");
    assert_eq!(record["gpus"][0]["deviceName"], "nvidia.com/GA102GL_A10");
    assert_eq!(record["cpu"]["dedicated"], true);
    assert_eq!(record["memory"]["hugepages"]["pageSize"], "1Gi");
    assert_eq!(
        record["placement"]["nodeSelector"]["nvidia.com/gpu.product"],
        "A10"
    );

    let input = stream(&[
        class(
            "gpu",
            json!({"cpu": {"cores": 2, "model": "Skylake Server"},
                   "memory": {"size": "3Gi", "hugepages": {"pageSize": "2Gi"}},
                   "gpus": [{"name": "g", "deviceName": "nvidia.com/x"}],
                   "hostDevices": [{"name": "g", "deviceName": "intel.com/qat"}]}),
        ),
        machine(
            "greedy",
            json!({"template": "small", "gpus": [{"name": "g", "deviceName": "nvidia.com/x"}],
                   "resources": {"cpu": {"dedicated": true, "model": "host-model"}}}),
        ),
    ]);
    let output = validate(&input);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    for expected in [
        r#"spec.cpu.model: Invalid value: "Skylake Server""#,
        r#"spec.memory.hugepages.pageSize: Unsupported value: "2Gi": supported values: "1Gi", "2Mi""#,
        r#"spec.hostDevices[0].name: Duplicate value: "g""#,
        "spec.gpus: Forbidden: a Machine cannot ask for devices",
        "spec.resources.cpu.dedicated: Forbidden",
        r#"spec.resources.cpu.model: Forbidden: MachineClass "small" sets no CPU model and allows none"#,
    ] {
        assert!(err.contains(expected), "{expected}\n{err}");
    }
}
