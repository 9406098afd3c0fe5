//! What `validate` refuses and warns about, and how it says so.

#[allow(unused_imports)]
use crate::*;
use std::path::Path;

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
