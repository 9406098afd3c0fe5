//! The admission path end to end: kube-apiserver v1.20 calls our HTTPS webhooks (registered with
//! a URL clientConfig and the test CA as caBundle) on every Machine create and update.
//! Each test has its own namespace and its own webhook configurations, scoped to that
//! namespace by a label, so tests share one control plane and run in parallel. The webhook
//! server runs inside the test's runtime, so kubectl runs as an async child process.

mod common;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kube::{Client, Error};
use serde_json::{Value, json};

use common::{Server, TestCa};
use kubevirt_operator::admission::{MUTATE_PATH, VALIDATE_PATH};
use kubevirt_operator::api::Machine;
use support::Fixture;

const SCOPE_LABEL: &str = "admission-e2e";

struct Env {
    client: Client,
    ns: String,
    machines: Api<DynamicObject>,
    _server: Server,
}

/// The shared control plane, a namespace, our webhook server and configurations for it.
async fn env(prefix: &str, review_versions: &[&str]) -> Env {
    let cp = Fixture::new().with_machine_crds().shared().await;
    let ns = cp.namespace(prefix).await.expect("namespace");
    let client = cp.client().await.expect("admin client");
    let label = json!({"metadata": {"labels": {SCOPE_LABEL: ns}}});
    Api::<Namespace>::all(client.clone())
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("label namespace");

    let ca = TestCa::new("admission-e2e-ca");
    let server = Server::start(&ca.issue("webhook")).await;
    register_webhooks(&client, &ns, &server, &ca, review_versions).await;
    let resource = ApiResource::erase::<Machine>(&());
    let machines = Api::namespaced_with(client.clone(), &ns, &resource);
    let env = Env {
        client,
        ns,
        machines,
        _server: server,
    };
    wait_until_webhooks_answer(&env).await;
    env
}

async fn register_webhooks(
    client: &Client,
    ns: &str,
    server: &Server,
    ca: &TestCa,
    versions: &[&str],
) {
    let client_config = |path: &str| WebhookClientConfig {
        url: Some(server.url(path)),
        ca_bundle: Some(ByteString(ca.cert_pem().into_bytes())),
        service: None,
    };
    let rules = Some(vec![RuleWithOperations {
        api_groups: Some(vec!["vitistack.io".into()]),
        api_versions: Some(vec!["v1alpha1".into()]),
        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
        resources: Some(vec!["machines".into()]),
        scope: Some("Namespaced".into()),
    }]);
    let selector = Some(LabelSelector {
        match_labels: Some([(SCOPE_LABEL.to_owned(), ns.to_owned())].into()),
        ..Default::default()
    });
    let versions: Vec<String> = versions.iter().map(|v| (*v).to_owned()).collect();
    let name = format!("e2e-{ns}");
    let mutating = MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        webhooks: Some(vec![MutatingWebhook {
            name: "mutate.machines.vitistack.io".into(),
            client_config: client_config(MUTATE_PATH),
            rules: rules.clone(),
            namespace_selector: selector.clone(),
            failure_policy: Some("Fail".into()),
            side_effects: "None".into(),
            timeout_seconds: Some(5),
            admission_review_versions: versions.clone(),
            ..Default::default()
        }]),
    };
    let validating = ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: "validate.machines.vitistack.io".into(),
            client_config: client_config(VALIDATE_PATH),
            rules,
            namespace_selector: selector,
            failure_policy: Some("Fail".into()),
            side_effects: "None".into(),
            timeout_seconds: Some(5),
            admission_review_versions: versions,
            ..Default::default()
        }]),
    };
    let pp = PostParams::default();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&pp, &mutating)
        .await
        .expect("mutating webhook configuration");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&pp, &validating)
        .await
        .expect("validating webhook configuration");
}

/// The API server picks new webhook configurations up asynchronously: probe with a dry-run of
/// an invalid Machine until both webhooks are in force.
async fn wait_until_webhooks_answer(env: &Env) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let probe = machine("probe", json!({"template": "huge"}));
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        match env.machines.create(&dry, &probe).await {
            Err(Error::Api(e)) if e.message.contains("admission webhook") => return,
            other => assert!(
                Instant::now() < deadline,
                "webhooks not in force after 60 s: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn machine(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("machine")
}

fn denial(result: Result<DynamicObject, Error>) -> Box<kube::core::Status> {
    match result {
        Err(Error::Api(e)) => e,
        other => panic!("expected the API server to deny, got {other:?}"),
    }
}

fn custom_vm() -> Value {
    json!({"template": "small", "resources": {"cpu": {"cores": 4}, "memory": {"size": "8Gi"}},
           "disks": [{"name": "data", "size": "100Gi", "storageClass": "fast-ssd"}]})
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cleanup_finalizer_is_added_on_create_and_never_put_back() {
    let env = env("adm-finalizer", &["v1", "v1beta1"]).await;
    let ours = kubevirt_operator::machine::FINALIZER;
    let pp = PostParams::default();
    let with_finalizers = |name: &str, list: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "finalizers": list}, "spec": {}
        }))
        .expect("machine")
    };
    let finalizers = |o: &DynamicObject| o.metadata.finalizers.clone().unwrap_or_default();

    // CREATE: added when absent, appended after others, never duplicated.
    let plain = env
        .machines
        .create(&pp, &machine("plain", json!({})))
        .await
        .expect("created");
    assert_eq!(finalizers(&plain), [ours]);
    let other = env
        .machines
        .create(&pp, &with_finalizers("other", json!(["example.com/keep"])))
        .await
        .expect("created");
    assert_eq!(finalizers(&other), ["example.com/keep", ours]);
    let again = env
        .machines
        .create(&pp, &with_finalizers("again", json!([ours])))
        .await
        .expect("created");
    assert_eq!(finalizers(&again), [ours]);

    // UPDATE: a user removing it, alone or with a spec change, keeps it removed.
    let merge = |v: Value| Patch::Merge(v);
    let released = env
        .machines
        .patch(
            "plain",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": null}, "spec": {"running": false}})),
        )
        .await
        .expect("finalizer removed");
    assert_eq!(finalizers(&released), Vec::<String>::new());
    assert_eq!(released.data["spec"]["running"], json!(false));

    // Deletion: the reconciler's removal of its finalizer from a terminating Machine sticks,
    // and the Machine goes once the last finalizer does.
    env.machines
        .delete("other", &Default::default())
        .await
        .expect("delete");
    let terminating = env
        .machines
        .patch(
            "other",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": ["example.com/keep"]}})),
        )
        .await
        .expect("our finalizer removed");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&terminating), ["example.com/keep"]);
    env.machines
        .patch(
            "other",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("last finalizer removed");
    assert!(
        env.machines.get_opt("other").await.expect("get").is_none(),
        "the Machine is gone once its finalizers are"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_rules_hold() {
    let env = env("adm-update", &["v1", "v1beta1"]).await;
    let pp = PatchParams::default();
    env.machines
        .create(
            &PostParams::default(),
            &machine(
                "vm",
                json!({"template": "medium", "disks": [{"name": "data", "size": "10Gi"}]}),
            ),
        )
        .await
        .expect("created");
    let merge = |v: Value| Patch::Merge(v);

    // Grow: allowed. Shrink: refused with the reason.
    let grown = env.machines.patch("vm", &pp, &merge(json!({"spec": {"disks": [{"name": "root", "size": "40Gi"}, {"name": "data", "size": "20Gi"}]}}))).await.expect("grow");
    assert_eq!(grown.data["spec"]["disks"][1]["size"], json!("20Gi"));
    let e = denial(env.machines.patch("vm", &pp, &merge(json!({"spec": {"disks": [{"name": "root", "size": "40Gi"}, {"name": "data", "size": "5Gi"}]}}))).await);
    assert!(
        e.message.contains(
            r#"spec.disks[1].size: Forbidden: disk "data" may not shrink from 20Gi to 5Gi"#
        ),
        "{}",
        e.message
    );

    // Removing a disk is refused, saying why.
    let e = denial(
        env.machines
            .patch(
                "vm",
                &pp,
                &merge(json!({"spec": {"disks": [{"name": "root", "size": "40Gi"}]}})),
            )
            .await,
    );
    assert!(
        e.message
            .contains(r#"spec.disks: Forbidden: disk "data" may not be removed"#),
        "{}",
        e.message
    );

    // Immutable storage class.
    let e = denial(env.machines.patch("vm", &pp, &merge(json!({"spec": {"disks": [{"name": "root", "size": "40Gi"}, {"name": "data", "size": "20Gi", "storageClass": "other"}]}}))).await);
    assert!(
        e.message
            .contains(r#"spec.disks[1].storageClass: Invalid value: "other": field is immutable"#),
        "{}",
        e.message
    );

    // A template change re-derives the template's values and keeps explicit ones.
    let larger = env
        .machines
        .patch(
            "vm",
            &pp,
            &merge(
                json!({"spec": {"template": "large", "resources": {"memory": {"size": "16Gi"}}}}),
            ),
        )
        .await
        .expect("template change");
    assert_eq!(
        larger.data["spec"]["resources"],
        json!({"cpu": {"cores": 4, "threads": 1, "sockets": 1}, "memory": {"size": "16Gi"}})
    );
    assert_eq!(larger.data["spec"]["disks"][0]["size"], json!("80Gi"));
    assert_eq!(larger.data["spec"]["disks"][1]["size"], json!("20Gi"));
    // Back to small would shrink the root disk.
    let e = denial(
        env.machines
            .patch("vm", &pp, &merge(json!({"spec": {"template": "small"}})))
            .await,
    );
    assert!(
        e.message
            .contains(r#"disk "root" may not shrink from 80Gi to 20Gi"#),
        "{}",
        e.message
    );

    // CPU, networks and running may change.
    let changed = env
        .machines
        .patch(
            "vm",
            &pp,
            &merge(
                json!({"spec": {"running": false, "resources": {"cpu": {"cores": 8}},
        "networks": [{"name": "eth0", "networkName": "prod"}]}}),
            ),
        )
        .await
        .expect("allowed changes");
    assert_eq!(changed.data["spec"]["running"], json!(false));
    assert_eq!(
        changed.data["spec"]["networks"][0]["model"],
        json!("virtio")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_reach_the_client_and_v1beta1_is_answered() {
    // Only v1beta1 offered: the API server must send, and accept, admission.k8s.io/v1beta1.
    let env = env("adm-v1beta1", &["v1beta1"]).await;
    let stored = env
        .machines
        .create(
            &PostParams::default(),
            &machine(
                "b",
                json!({"template": "small", "bootOrder": ["cdrom", "disk"]}),
            ),
        )
        .await
        .expect("created over v1beta1");
    assert_eq!(stored.data["spec"]["resources"]["cpu"]["cores"], json!(1));
    let cp = Fixture::new().with_machine_crds().shared().await;
    let out = tokio::process::Command::from(cp.kubectl().expect("kubectl"))
        .args([
            "patch",
            "machine",
            "b",
            "-n",
            &env.ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"bootOrder":["cdrom"]}}"#,
        ])
        .output()
        .await
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"Warning: spec.bootOrder[0]: "cdrom" is accepted but ignored"#),
        "{stderr}"
    );
    drop(env.client);
}
