//! `manifests/` as users apply it: `kubectl apply -k manifests/ --dry-run=server` against a real
//! kube-apiserver (every object validated and admitted, nothing stored), and the facts SPEC.md
//! asks of the Deployment, the PodDisruptionBudget and the Service, read from what kustomize
//! renders.

mod chart;
mod support;

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_json::Value;
use support::{ControlPlane, Fixture};

fn manifests_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests")
        .display()
        .to_string()
}

fn text(out: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What `kubectl kustomize manifests/` renders, with a kubectl whose kustomize reads the
/// kustomization (`labels`, components: kustomize v5, kubectl 1.27+; the test control plane's
/// kubectl is older).
fn rendered_yaml() -> String {
    chart::kustomize(Path::new(&manifests_dir()))
}

/// Every document `kubectl kustomize manifests/` renders.
fn rendered() -> Vec<Value> {
    serde_yaml::Deserializer::from_str(&rendered_yaml())
        .map(|doc| Value::deserialize(doc).expect("YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

fn one<T: serde::de::DeserializeOwned>(docs: &[Value], kind: &str) -> T {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "exactly one {kind} in manifests/");
    serde_json::from_value(found[0].clone()).unwrap_or_else(|e| panic!("{kind}: {e}"))
}

async fn kubectl(cp: &ControlPlane, args: &[&str], stdin: Option<String>) -> Output {
    let mut cmd = cp.kubectl().expect("kubectl");
    cmd.args(args);
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        use std::process::Stdio;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin.unwrap_or_default().as_bytes())?;
        drop(input);
        child.wait_with_output()
    })
    .await
    .expect("join")
    .expect("run kubectl")
}

/// `kubectl apply -k manifests/ --dry-run=server` (rendered, then applied): every object accepted
/// by the server.
///
/// The PodDisruptionBudget is `policy/v1` (Kubernetes 1.21+; `policy/v1beta1` is gone since
/// 1.25). The test API server is v1.20, which serves only `policy/v1beta1`: there, everything
/// else must be accepted, the PDB must fail only for its API version, and the same PDB must be
/// accepted as `policy/v1beta1` (the fields used are identical in both versions). On a server
/// with `policy/v1` the plain command must succeed outright.
#[tokio::test]
async fn kubectl_apply_k_dry_run_server_succeeds() {
    let cp = Fixture::new().shared().await;
    let docs = rendered();
    let versions = kubectl(cp, &["api-versions"], None).await;
    assert!(versions.status.success(), "{}", text(&versions));
    let has_policy_v1 = String::from_utf8_lossy(&versions.stdout)
        .lines()
        .any(|l| l.trim() == "policy/v1");

    let out = kubectl(
        cp,
        &["apply", "-f", "-", "--dry-run=server"],
        Some(rendered_yaml()),
    )
    .await;
    let report = text(&out);
    let accepted = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.ends_with("(server dry run)"))
        .count();
    if has_policy_v1 {
        assert!(out.status.success(), "kubectl apply -k: {report}");
        assert_eq!(accepted, docs.len(), "{report}");
        return;
    }
    let pdbs: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "PodDisruptionBudget")
        .collect();
    assert_eq!(pdbs.len(), 1, "{report}");
    assert_eq!(pdbs[0]["apiVersion"], "policy/v1");
    assert_eq!(
        accepted,
        docs.len() - 1,
        "all but the PDB accepted: {report}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // (Warnings, e.g. about the namespace the test control plane pre-creates, are not errors.)
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{report}");
    assert!(
        errors[0].contains(r#"no matches for kind "PodDisruptionBudget" in version "policy/v1""#),
        "{report}"
    );
    let mut v1beta1 = pdbs[0].clone();
    v1beta1["apiVersion"] = "policy/v1beta1".into();
    let out = kubectl(
        cp,
        &["apply", "-f", "-", "--dry-run=server"],
        Some(serde_json::to_string(&v1beta1).expect("json")),
    )
    .await;
    assert!(
        out.status.success(),
        "the PDB as policy/v1beta1: {}",
        text(&out)
    );
}

fn quantity(q: Option<&std::collections::BTreeMap<String, Quantity>>, key: &str) -> String {
    q.and_then(|m| m.get(key))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

fn probe_path(c: &Container, liveness: bool) -> (String, String) {
    let probe = if liveness {
        c.liveness_probe.as_ref()
    } else {
        c.readiness_probe.as_ref()
    };
    let get = probe.and_then(|p| p.http_get.as_ref()).expect("HTTP probe");
    let port = match &get.port {
        IntOrString::String(s) => s.clone(),
        IntOrString::Int(i) => i.to_string(),
    };
    (get.path.clone().unwrap_or_default(), port)
}

#[test]
fn the_deployment_pdb_and_service_are_as_specified() {
    let docs = rendered();
    let deployment: Deployment = one(&docs, "Deployment");
    let spec = deployment.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.as_ref().expect("pod spec");
    let pod_labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone());
    assert_eq!(
        pod.security_context
            .as_ref()
            .and_then(|s| s.run_as_non_root),
        Some(true),
        "pod runAsNonRoot"
    );
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];
    let ports: Vec<(String, i32)> = c
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
        .collect();
    assert!(ports.contains(&("webhook".into(), 8443)), "{ports:?}");
    let probes_port = ports
        .iter()
        .find(|(n, _)| n == "probes")
        .map(|(_, p)| *p)
        .expect("a probes port");
    assert_eq!(probes_port, 8081, "HEALTH_PROBE_BIND_ADDRESS default");
    assert_eq!(probe_path(c, true), ("/healthz".into(), "probes".into()));
    assert_eq!(probe_path(c, false), ("/readyz".into(), "probes".into()));
    let sc = c
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        sc.capabilities.as_ref().and_then(|c| c.drop.clone()),
        Some(vec!["ALL".to_owned()])
    );
    let res = c.resources.as_ref().expect("resources");
    assert_eq!(quantity(res.requests.as_ref(), "cpu"), "100m");
    assert_eq!(quantity(res.requests.as_ref(), "memory"), "256Mi");
    assert_eq!(
        quantity(res.limits.as_ref(), "cpu"),
        "",
        "no CPU limit: CFS throttling would starve tokio's workers"
    );
    assert_eq!(quantity(res.limits.as_ref(), "memory"), "512Mi");

    let pdb: PodDisruptionBudget = one(&docs, "PodDisruptionBudget");
    let pdb_spec = pdb.spec.expect("PDB spec");
    assert_eq!(pdb_spec.min_available, Some(IntOrString::Int(1)));
    let selected = pdb_spec
        .selector
        .and_then(|s| s.match_labels)
        .expect("PDB selector");
    let labels = pod_labels.expect("pod labels");
    assert!(
        selected.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "the PDB selects the Deployment's pods: {selected:?} vs {labels:?}"
    );

    let services: Vec<Service> = docs
        .iter()
        .filter(|d| d["kind"] == "Service")
        .map(|d| serde_json::from_value(d.clone()).expect("Service"))
        .collect();
    assert_eq!(services.len(), 2, "the webhook and the metrics Service");
    let service = services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(kubevirt_operator::certs::WEBHOOK_SERVICE))
        .expect("the webhook Service")
        .clone();
    let s = service.spec.expect("Service spec");
    let ports = s.ports.clone().unwrap_or_default();
    assert_eq!(
        ports.len(),
        1,
        "only the webhook port on the webhook Service"
    );
    let webhook = ports.iter().find(|p| p.port == 443).expect("port 443");
    assert_eq!(
        webhook.target_port,
        Some(IntOrString::String("webhook".into()))
    );
    let selector = s.selector.expect("Service selector");
    assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
    assert_eq!(
        service.metadata.name.as_deref(),
        Some(kubevirt_operator::certs::WEBHOOK_SERVICE),
        "the webhook configurations name this Service"
    );
}

/// Issue 24: `manifests/` now ships the webhook configurations. Over an install whose operator
/// made them (same name, its label, its caBundle), `kubectl apply` takes them over and keeps
/// their caBundle, so no Machine write goes unchecked until the new operator writes its own.
#[tokio::test]
async fn kubectl_apply_adopts_the_configurations_an_older_operator_made() {
    use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    use kube::api::{Api, DeleteParams, PostParams};
    use kubevirt_operator::certs::{self, webhook_config};

    let cp = Fixture::new().shared().await;
    let client = cp.client().await.expect("client");
    let lifetimes = certs::CertificateArgs::default()
        .lifetimes()
        .expect("lifetimes");
    let settings =
        certs::Settings::new("kubevirt-operator-system", None, lifetimes).expect("settings");
    let legacy_ca = b"-----BEGIN CERTIFICATE-----\nlegacy\n-----END CERTIFICATE-----\n";
    let mut legacy = webhook_config::mutating(&settings, legacy_ca);
    legacy.metadata.labels = Some(certs::managed_labels());
    let api: Api<MutatingWebhookConfiguration> = Api::all(client);
    api.create(&PostParams::default(), &legacy)
        .await
        .expect("the older operator's configuration");
    let ours: Vec<Value> = rendered()
        .into_iter()
        .filter(|d| d["kind"] == "MutatingWebhookConfiguration")
        .collect();
    assert_eq!(ours.len(), 1);
    let out = kubectl(
        cp,
        &["apply", "-f", "-"],
        Some(serde_json::to_string(&ours[0]).expect("json")),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let adopted = api.get("kubevirt-operator").await.expect("get");
    let _ = api
        .delete("kubevirt-operator", &DeleteParams::default())
        .await;
    let hooks = adopted.webhooks.expect("webhooks");
    assert_eq!(
        hooks[0]
            .client_config
            .ca_bundle
            .as_ref()
            .map(|b| b.0.clone()),
        Some(legacy_ca.to_vec()),
        "the caBundle is kept"
    );
    let labels = adopted.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("app.kubernetes.io/instance").map(String::as_str),
        Some("kubevirt-operator"),
        "the manifests' labels applied: {labels:?}"
    );
}

/// Issue 24: the Dockerfile's base images are pinned by digest, its image carries the OCI
/// labels, the version label follows the crate, and it runs as the user the manifests state.
#[test]
fn the_dockerfile_pins_its_bases_and_labels_the_image() {
    let dockerfile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile"))
            .expect("Dockerfile");
    let froms: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(froms.len(), 2, "{froms:?}");
    for from in froms {
        let image = from.split_whitespace().nth(1).expect("an image");
        let (_, digest) = image
            .split_once("@sha256:")
            .unwrap_or_else(|| panic!("{from}: no digest"));
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{from}"
        );
    }
    for label in [
        "title",
        "description",
        "source",
        "licenses",
        "version",
        "revision",
    ] {
        assert!(
            dockerfile.contains(&format!("org.opencontainers.image.{label}=")),
            "OCI label {label}"
        );
    }
    assert!(dockerfile.contains(&format!("ARG VERSION={}\n", env!("CARGO_PKG_VERSION"))));
    assert!(dockerfile.contains("USER 65532:65532"));
    let d: Deployment = one(&rendered(), "Deployment");
    let pod = d.spec.and_then(|s| s.template.spec).expect("pod spec");
    let sc = pod.security_context.expect("pod securityContext");
    assert_eq!(
        (sc.run_as_user, sc.run_as_group),
        (Some(65532), Some(65532))
    );
}

/// hadolint, as an admin would run it on the Dockerfile: no finding.
#[test]
fn hadolint_finds_nothing_in_the_dockerfile() {
    let out = chart::tool("hadolint")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile"))
        .output()
        .expect("hadolint");
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "{}",
        text(&out)
    );
}
