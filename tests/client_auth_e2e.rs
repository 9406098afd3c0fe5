//! Issue 25, client authentication end to end: kube-apiserver configured exactly as
//! docs/operator/security.md "Client authentication" says (its AdmissionConfiguration and webhook
//! kubeconfig are taken from that page, paths moved into the control plane's directory) presents
//! a client certificate of a test CA; `kubevirt-operator webhook --client-ca-file` with that CA
//! answers it, reached through a Service as in a cluster, and refuses any other caller at the
//! handshake.

mod common;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, Error};
use serde_json::json;

use common::{ServingPair, TestCa, WebhookProcess, valid_review};
use kubevirt_operator::admission::{MUTATE_PATH, VALIDATE_PATH};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::FINALIZER;
use support::{ApiserverExtras, Fixture, OPERATOR_NAMESPACE};

/// The webhook Service of the kustomize manifests (and of a release named kubevirt-operator).
const SERVICE: &str = "kubevirt-operator-webhook";
const WAIT: Duration = Duration::from_secs(60);

/// The fenced YAML block of docs/operator/security.md whose first line is `# <path>`.
fn documented(path: &str) -> String {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operator/security.md"),
    )
    .expect("docs/operator/security.md");
    let start = doc
        .find(&format!("```yaml\n   # {path}\n"))
        .unwrap_or_else(|| panic!("docs/operator/security.md has no YAML block for {path}"));
    let block = &doc[start + "```yaml\n".len()..];
    let block = &block[..block.find("```").expect("the block's end")];
    // The block is indented under its list item.
    block
        .lines()
        .map(|l| l.strip_prefix("   ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The documented files, with `/etc/kubernetes` (and its `pki/`) the control plane's directory.
fn local(text: &str) -> String {
    text.replace("/etc/kubernetes/pki/", "{dir}/")
        .replace("/etc/kubernetes/", "{dir}/")
}

/// kube-apiserver with the documented AdmissionConfiguration; its user for the Service on
/// `port` (the documented name, which omits 443, with the port) presents `identity`.
fn documented_apiserver(port: u16, identity: &ServingPair) -> ApiserverExtras {
    let name = format!("{SERVICE}.{OPERATOR_NAMESPACE}.svc");
    let kubeconfig = documented("/etc/kubernetes/webhook-kubeconfig.yaml");
    let user = format!("- name: {name}\n");
    assert!(
        kubeconfig.contains(&user),
        "the documented user: {kubeconfig}"
    );
    let kubeconfig = kubeconfig.replace(&user, &format!("- name: {name}:{port}\n"));
    ApiserverExtras::new()
        .file(
            "admission-config.yaml",
            &local(&documented("/etc/kubernetes/admission-config.yaml")),
        )
        .file("webhook-kubeconfig.yaml", &local(&kubeconfig))
        .file("webhook-client.crt", &identity.cert_pem)
        .file("webhook-client.key", &identity.key_pem)
        .arg("--admission-control-config-file={dir}/admission-config.yaml")
}

/// The Service the webhooks are registered by: an ExternalName for localhost, which
/// kube-apiserver dials (there are no Service IPs without kube-proxy).
async fn register_by_service(client: &Client, port: u16, serving_ca: &TestCa) {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": SERVICE, "namespace": OPERATOR_NAMESPACE},
        "spec": {"type": "ExternalName", "externalName": "localhost"}
    }))
    .expect("Service");
    let pp = PostParams::default();
    Api::<Service>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .create(&pp, &service)
        .await
        .expect("the webhook Service");
    let client_config = |path: &str| WebhookClientConfig {
        service: Some(ServiceReference {
            name: SERVICE.into(),
            namespace: OPERATOR_NAMESPACE.into(),
            path: Some(path.into()),
            port: Some(i32::from(port)),
        }),
        ca_bundle: Some(ByteString(serving_ca.cert_pem().into_bytes())),
        url: None,
    };
    let rules = Some(vec![RuleWithOperations {
        api_groups: Some(vec!["vitistack.io".into()]),
        api_versions: Some(vec!["v1alpha1".into()]),
        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
        resources: Some(vec!["machines".into()]),
        scope: Some("Namespaced".into()),
    }]);
    let mut mutating = MutatingWebhookConfiguration::default();
    mutating.metadata.name = Some("client-auth".into());
    mutating.webhooks = Some(vec![MutatingWebhook {
        name: "mutate.machines.vitistack.io".into(),
        client_config: client_config(MUTATE_PATH),
        rules: rules.clone(),
        failure_policy: Some("Fail".into()),
        side_effects: "None".into(),
        timeout_seconds: Some(5),
        admission_review_versions: vec!["v1".into()],
        ..Default::default()
    }]);
    let mut validating = ValidatingWebhookConfiguration::default();
    validating.metadata.name = Some("client-auth".into());
    validating.webhooks = Some(vec![ValidatingWebhook {
        name: "validate.machines.vitistack.io".into(),
        client_config: client_config(VALIDATE_PATH),
        rules,
        failure_policy: Some("Fail".into()),
        side_effects: "None".into(),
        timeout_seconds: Some(5),
        admission_review_versions: vec!["v1".into()],
        ..Default::default()
    }]);
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&pp, &mutating)
        .await
        .expect("mutating webhook configuration");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&pp, &validating)
        .await
        .expect("validating webhook configuration");
}

fn machine(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("Machine")
}

/// A direct caller of the webhook at `port`, trusting `serving_ca`, presenting `identity`.
async fn call_directly(
    port: u16,
    serving_ca: &TestCa,
    identity: Option<&ServingPair>,
) -> reqwest::Result<reqwest::Response> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(serving_ca.cert_pem().as_bytes()).expect("CA"),
        )
        .http1_only()
        .no_proxy()
        .timeout(Duration::from_secs(5));
    if let Some(pair) = identity {
        let pem = format!("{}{}", pair.cert_pem, pair.key_pem);
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"));
    }
    builder
        .build()
        .expect("client")
        .post(format!("https://127.0.0.1:{port}{VALIDATE_PATH}"))
        .json(&valid_review("direct"))
        .send()
        .await
}

/// Stops the webhook process however the test ends.
struct Stop(WebhookProcess);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_kube_apiserver_with_the_documented_client_certificate_is_answered() {
    support::init_crypto();
    let serving_ca = TestCa::new("webhook serving CA");
    let client_ca = TestCa::new("webhook client CA");
    let stranger_ca = TestCa::new("someone else's CA");
    let apiserver_identity = client_ca.issue("kube-apiserver-webhook-client");

    let dir = tempfile::tempdir().expect("dir");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, client_ca.cert_pem()).expect("client CA file");
    let serving = serving_ca.issue_for(
        "webhook",
        &[&format!("{SERVICE}.{OPERATOR_NAMESPACE}.svc"), "127.0.0.1"],
    );
    let webhook = Stop(WebhookProcess::start_serving(
        &serving,
        &["--client-ca-file", &ca_file.display().to_string()],
    ));
    let port = webhook.0.addr.port();

    // kube-apiserver with the documented AdmissionConfiguration.
    let cp = Fixture::new()
        .apiserver(documented_apiserver(port, &apiserver_identity))
        .with_machine_crds()
        .start()
        .await;
    let client = cp.admin_client().await;
    register_by_service(&client, port, &serving_ca).await;
    let ns = cp.namespace("client-auth").await.expect("namespace");
    let machines: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::erase::<Machine>(&()));

    // Through kube-apiserver: admitted and defaulted by the mutating webhook (the configuration
    // takes a moment to be in force; until then a Machine may be stored untouched).
    let pp = PostParams::default();
    let deadline = Instant::now() + WAIT;
    let mut attempt = 0;
    let admitted = loop {
        attempt += 1;
        let name = format!("vm-{attempt}");
        let created = machines.create(&pp, &machine(&name, json!({}))).await;
        match &created {
            Ok(m)
                if m.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == FINALIZER) =>
            {
                break m.clone();
            }
            _ => assert!(
                Instant::now() < deadline,
                "no Machine admitted by the webhooks within {WAIT:?}: {created:?}\n{}",
                cp.logs()
            ),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(admitted.data["spec"]["template"], "medium", "{admitted:?}");
    assert_eq!(
        admitted.data["spec"]["resources"]["memory"]["size"], "4Gi",
        "the template's defaults: {admitted:?}"
    );
    // The validating webhook is reached too: an invalid Machine is denied by it.
    match machines
        .create(&pp, &machine("bad", json!({"template": "huge"})))
        .await
    {
        Err(Error::Api(e)) => assert!(
            e.message.contains("denied the request") && e.message.contains("spec.template"),
            "{e:?}"
        ),
        other => panic!("an invalid Machine was not denied: {other:?}"),
    }

    // Directly: kube-apiserver's certificate is answered, none or a stranger's is not.
    let answer = call_directly(port, &serving_ca, Some(&apiserver_identity))
        .await
        .expect("an answer with the client CA's certificate");
    assert_eq!(answer.status(), 200);
    let stranger = stranger_ca.issue("pod");
    for (who, identity) in [("no certificate", None), ("a stranger's", Some(&stranger))] {
        match call_directly(port, &serving_ca, identity).await {
            // The server's TLS alert ends the handshake: no HTTP answer at all. Under TLS 1.3
            // the client may send its request before reading the alert, and then sees the
            // connection end instead; either way, nothing is answered (the call above, with
            // the client CA's certificate, shows the server up).
            Err(e) => {
                let e = format!("{e:?}");
                assert!(
                    e.contains("AlertReceived") || e.contains("Canceled") || e.contains("closed"),
                    "{who}: {e}"
                );
            }
            Ok(answer) => panic!("{who}: answered {answer:?}"),
        }
    }
}
