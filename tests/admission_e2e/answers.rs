//! What authors see: every field error, kubectl's view, defaults and merges, dry runs.

use crate::support::Fixture;
#[allow(unused_imports)]
use crate::*;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_machines_are_denied_with_every_field_error() {
    let env = env("adm-invalid", &["v1", "v1beta1"]).await;
    let bad = machine(
        "bad",
        json!({
            "template": "huge",
            "disks": [{"name": "data", "size": "1Gi"}, {"name": "logs", "size": "1Gi", "accessMode": "ReadWriteAll"}],
            "networks": [{"name": "eth0", "networkName": "prod", "model": "ne2000"}],
        }),
    );
    let e = denial(env.machines.create(&PostParams::default(), &bad).await);
    assert_eq!(e.code, 422, "{e:?}");
    for part in [
        r#"admission webhook "mutate.machines.vitistack.io" denied the request"#,
        r#"spec.template: Unsupported value: "huge": supported values: "large", "medium", "small""#,
        r#"spec.disks[1].accessMode: Unsupported value: "ReadWriteAll": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce""#,
        r#"spec.networks[0].model: Unsupported value: "ne2000""#,
    ] {
        assert!(
            e.message.contains(part),
            "missing {part:?} in {}",
            e.message
        );
    }
    // A wrong type is caught by our schema check before the API server's own.
    let typed = machine("typed", json!({"resources": {"cpu": {"cores": "four"}}}));
    let e = denial(env.machines.create(&PostParams::default(), &typed).await);
    assert!(
        e.message.contains(
            r#"spec.resources.cpu.cores: Invalid value: "four": must be of type integer"#
        ),
        "{}",
        e.message
    );
    assert!(
        env.machines.get_opt("bad").await.expect("get").is_none(),
        "nothing stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_users_see_the_field_errors() {
    let env = env("adm-kubectl", &["v1", "v1beta1"]).await;
    let cp = Fixture::new().with_machine_crds().shared().await;
    let manifest = r#"{"apiVersion":"vitistack.io/v1alpha1","kind":"Machine","metadata":{"name":"k"},
        "spec":{"resources":{"cpu":{"cores":300}},"bootOrder":["disk","disk"]}}"#;
    let mut cmd = tokio::process::Command::from(cp.kubectl().expect("kubectl"));
    cmd.args(["apply", "-n", &env.ns, "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(manifest.as_bytes())
        .await
        .expect("write manifest");
    drop(stdin);
    let out = child.wait_with_output().await.expect("kubectl finishes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "kubectl apply must fail");
    assert!(
        stderr.contains(
            "spec.resources.cpu.cores: Invalid value: 300: must be between 1 and 256, inclusive"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"spec.bootOrder[1]: Duplicate value: "disk""#),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_machines_are_stored_defaulted_and_merged() {
    let env = env("adm-valid", &["v1", "v1beta1"]).await;
    let stored = env
        .machines
        .create(&PostParams::default(), &machine("custom-vm", custom_vm()))
        .await
        .expect("created");
    let spec = &stored.data["spec"];
    assert_eq!(
        spec["resources"],
        json!({"cpu": {"cores": 4, "threads": 1, "sockets": 1}, "memory": {"size": "8Gi"}})
    );
    assert_eq!(
        spec["disks"],
        // Modes stay unset: the reconciler takes them from the class's StorageProfile.
        json!([
        {"name": "root", "size": "20Gi"},
        {"name": "data", "size": "100Gi", "storageClass": "fast-ssd"}])
    );
    assert_eq!(
        (
            spec["running"].clone(),
            spec["domain"]["machine"]["type"].clone()
        ),
        (json!(true), json!("pc-q35"))
    );
    assert!(
        stored
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("vitistack.io/template-defaults")
    );
    // A Machine with no spec at all gets every default.
    let bare: DynamicObject = serde_json::from_value(json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine", "metadata": {"name": "bare"}})).unwrap();
    let stored = env
        .machines
        .create(&PostParams::default(), &bare)
        .await
        .expect("created");
    assert_eq!(stored.data["spec"]["template"], json!("medium"));
    assert_eq!(stored.data["spec"]["disks"][0]["size"], json!("40Gi"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_dry_run_answers_the_same_and_stores_nothing() {
    let env = env("adm-dryrun", &["v1", "v1beta1"]).await;
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let answered = env
        .machines
        .create(&dry, &machine("dry", custom_vm()))
        .await
        .expect("dry-run create");
    assert_eq!(answered.data["spec"]["disks"][0]["size"], json!("20Gi"));
    assert_eq!(
        answered.metadata.finalizers,
        Some(vec![kubevirt_operator::machine::FINALIZER.to_owned()])
    );
    assert!(
        env.machines.get_opt("dry").await.expect("get").is_none(),
        "dry run stores nothing"
    );
    let e = denial(
        env.machines
            .create(&dry, &machine("dry-bad", json!({"template": "huge"})))
            .await,
    );
    assert!(
        e.message
            .contains(r#"spec.template: Unsupported value: "huge""#),
        "{}",
        e.message
    );
}
