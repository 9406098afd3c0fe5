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

/// The tests, by subject, in tests/admission_e2e/ (still one test binary).
mod admission_e2e {
    mod answers;
    mod rules;
}
