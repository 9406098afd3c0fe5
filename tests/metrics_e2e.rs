//! `/metrics`, `/healthz` and `/readyz` of `kubevirt-operator run` against a real control plane
//! (self-managed certificates, webhooks called by kube-apiserver): every metric SPEC.md names,
//! with its labels, after Machines that succeed, miss a StorageClass or miss a
//! NetworkConfiguration, a claim that becomes Bound, and admission calls. Readiness: not ready
//! while the serving certificate cannot exist (a foreign, unlabelled Secret holds its name, which
//! the leader refuses to overwrite), ready once it can.

mod common;
mod metrics;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use metrics::samples;
use serde_json::{Value, json};

use kubevirt_operator::api::Machine;
use support::{ControlPlane, Fixture, Proc};

const WAIT: Duration = Duration::from_secs(60);

async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let resp = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.text().await.ok()?))
}

async fn until<T, F, Fut>(what: &str, op: &Proc, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    support::eventually_with(WAIT, what, || op.log_tail(60), check).await
}

struct Ports {
    metrics: u16,
    probes: u16,
}

/// `kubevirt-operator run` with self-managed certificates and the webhooks reached by URL on
/// loopback (their configurations installed for it); its log goes to
/// `<control plane dir>/<identity>/operator.log`.
async fn start_operator(
    cp: &ControlPlane,
    op_ns: &str,
    identity: &str,
    extra: &[&str],
) -> (Proc, Ports) {
    let [webhook, metrics, probes] = [(); 3].map(|()| support::free_port().expect("port"));
    let admin = cp.client().await.expect("admin client");
    support::webhooks::install_for_url(&admin, op_ns, &format!("https://127.0.0.1:{webhook}"))
        .await;
    let dir = cp.dir().join(identity);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut args: Vec<String> = vec![
        "--log-format".into(),
        "json".into(),
        "run".into(),
        "--kubeconfig".into(),
        cp.admin_kubeconfig().display().to_string(),
        "--namespace".into(),
        op_ns.into(),
        "--identity".into(),
        identity.into(),
        "--webhook-url".into(),
        format!("https://127.0.0.1:{webhook}"),
        "--listen".into(),
        format!("127.0.0.1:{webhook}"),
        "--metrics-bind-address".into(),
        format!("127.0.0.1:{metrics}"),
        "--health-probe-bind-address".into(),
        format!("127.0.0.1:{probes}"),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let op = Proc::spawn(
        "kubevirt-operator",
        Path::new(env!("CARGO_BIN_EXE_kubevirt-operator")),
        args.into_iter().map(Into::into).collect(),
        dir.join("operator.log"),
    )
    .expect("spawn operator");
    (op, Ports { metrics, probes })
}

async fn create_machine(client: &Client, ns: &str, mut object: Value) -> Result<(), String> {
    object["apiVersion"] = "vitistack.io/v1alpha1".into();
    object["kind"] = "Machine".into();
    let obj: DynamicObject = serde_json::from_value(object).expect("machine object");
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ApiResource::erase::<Machine>(&()))
        .create(&PostParams::default(), &obj)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_and_probes() {
    let started = Instant::now();
    let cp = Fixture::new().with_all_crds().start().await;
    let admin = cp.admin_client().await;

    // A foreign Secret holds the serving Secret's name: no certificate until it goes.
    let op_ns = "metrics-operator";
    let mut ns = Namespace::default();
    ns.metadata.name = Some(op_ns.into());
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("operator namespace");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), op_ns);
    let mut foreign = Secret {
        type_: Some("Opaque".into()),
        data: Some([("junk".to_owned(), ByteString(b"x".to_vec()))].into()),
        ..Secret::default()
    };
    foreign.metadata.name = Some(kubevirt_operator::certs::SERVING_SECRET.into());
    secrets
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign Secret");
    let (op, Ports { metrics, probes }) = start_operator(
        &cp,
        op_ns,
        "metrics",
        &[
            "--reconcile-interval",
            "2s",
            "--metrics-max-connections-per-client",
            "1",
        ],
    )
    .await;

    let healthz = until("/healthz", &op, || http_get(probes, "/healthz")).await;
    assert_eq!(healthz.0, 200, "{healthz:?}");
    for _ in 0..10 {
        let (status, body) = http_get(probes, "/readyz").await.expect("/readyz answers");
        assert_eq!(status, 500, "ready without a serving certificate: {body}");
        assert!(body.contains("serving certificate"), "{body}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    secrets
        .delete(
            kubevirt_operator::certs::SERVING_SECRET,
            &Default::default(),
        )
        .await
        .expect("delete the foreign Secret");
    until("/readyz 200", &op, || async {
        let (status, _) = http_get(probes, "/readyz").await?;
        (status == 200).then_some(())
    })
    .await;
    let (status, _) = http_get(probes, "/healthz").await.expect("/healthz");
    assert_eq!(status, 200);

    // Webhook configurations filled; Machines created through kube-apiserver are admitted.
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    until("the webhook configurations filled", &op, || async {
        let v = validating
            .get_opt("kubevirt-operator")
            .await
            .ok()
            .flatten()?;
        v.webhooks?.first()?.client_config.ca_bundle.clone()
    })
    .await;
    let work = cp.namespace("metrics").await.expect("namespace");
    let sc: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast"}, "provisioner": "example.com/none"
    }))
    .expect("SC");
    Api::<StorageClass>::all(admin.clone())
        .create(&PostParams::default(), &sc)
        .await
        .expect("StorageClass");
    let machines = [
        json!({"metadata": {"name": "ok"}, "spec": {"template": "small",
            "disks": [{"name": "data", "size": "1Gi", "storageClass": "fast"}]}}),
        json!({"metadata": {"name": "no-sc"}, "spec": {"template": "small",
            "disks": [{"name": "data", "size": "1Gi", "storageClass": "missing-class"}]}}),
        json!({"metadata": {"name": "no-net"}, "spec": {"template": "medium",
            "networks": [{"name": "eth0", "networkName": "missing-net"}]}}),
        // A disk image: a DataVolume, counted by phase.
        json!({"metadata": {"name": "imported"}, "spec": {"template": "small",
            "disks": [{"name": "root", "source": {"http": {"url": "https://example.com/a.qcow2"}}}]}}),
    ];
    for m in machines {
        let m2 = m.clone();
        let (admin, work) = (admin.clone(), work.clone());
        until("a Machine admitted by the webhooks", &op, move || {
            let (m, admin, work) = (m2.clone(), admin.clone(), work.clone());
            async move { create_machine(&admin, &work, m).await.ok() }
        })
        .await;
    }
    // One denied by the validating webhook.
    let denied = create_machine(
        &admin,
        &work,
        json!({"metadata": {"name": "huge"}, "spec": {"template": "gigantic"}}),
    )
    .await;
    assert!(denied.is_err(), "an unknown template is admitted");

    // The volume controller's part: the data claim becomes Bound.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), &work);
    until("PVC ok-data", &op, || async {
        pvcs.get_opt("ok-data").await.ok().flatten()
    })
    .await;
    pvcs.patch_status(
        "ok-data",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await
    .expect("bind PVC");

    let checks: &[(&str, &[&str], Option<&str>)] = &[
        (
            "kubevirt_operator_machines_total",
            &["phase", "template"],
            Some("template=\"small\""),
        ),
        (
            "kubevirt_operator_reconciliation_duration_seconds_count",
            &["controller"],
            Some("controller=\"machine\""),
        ),
        (
            "kubevirt_operator_reconciliation_errors_total",
            &["controller", "error_type"],
            Some("error_type=\"StorageClassNotFound\""),
        ),
        (
            "kubevirt_operator_reconciliation_errors_total",
            &["controller", "error_type"],
            Some("error_type=\"NetworkConfigurationNotFound\""),
        ),
        (
            "kubevirt_operator_virtual_machines_total",
            &["status"],
            None,
        ),
        (
            "kubevirt_operator_storage_provisioning_duration_seconds_count",
            &["storage_class"],
            Some("storage_class=\"fast\""),
        ),
        (
            "kubevirt_operator_network_configuration_errors_total",
            &["error_type"],
            Some("error_type=\"NetworkConfigurationNotFound\""),
        ),
        (
            "kubevirt_operator_admission_requests_total",
            &["webhook", "result"],
            None,
        ),
        (
            "kubevirt_operator_admission_duration_seconds_count",
            &["webhook"],
            None,
        ),
        (
            "kubevirt_operator_certificate_expiry_timestamp_seconds",
            &["certificate"],
            Some("certificate=\"serving\""),
        ),
        (
            "kubevirt_operator_certificate_expiry_timestamp_seconds",
            &["certificate"],
            Some("certificate=\"ca\""),
        ),
        ("kubevirt_operator_data_volumes", &["phase"], None),
        (
            "kubevirt_operator_listener_refused_total",
            &["listener", "reason"],
            Some("listener=\"metrics\""),
        ),
    ];
    // A second connection from one client to /metrics, over its cap of 1: refused and counted.
    let held = tokio::net::TcpStream::connect(("127.0.0.1", metrics))
        .await
        .expect("connect");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut second = tokio::net::TcpStream::connect(("127.0.0.1", metrics))
        .await
        .expect("connect");
    let mut byte = [0u8; 1];
    let closed = tokio::io::AsyncReadExt::read(&mut second, &mut byte).await;
    assert!(
        matches!(closed, Ok(0) | Err(_)),
        "the second connection is closed"
    );
    drop(held);
    let text = until("every metric", &op, || async {
        let (status, text) = http_get(metrics, "/metrics").await?;
        assert_eq!(status, 200);
        checks
            .iter()
            .all(|(name, labels, must)| {
                samples(&text, name, labels)
                    .iter()
                    .any(|l| must.is_none_or(|m| l.contains(m)))
            })
            .then_some(text)
    })
    .await;
    // Admission: both webhooks called, an allowed and a denied result.
    let admissions = samples(
        &text,
        "kubevirt_operator_admission_requests_total",
        &["webhook", "result"],
    );
    let joined = admissions.join("\n");
    assert!(
        admissions.len() >= 3,
        "mutate and validate, allowed and denied:\n{joined}"
    );
    let ok_vm = samples(
        &text,
        "kubevirt_operator_virtual_machines_total",
        &["status"],
    );
    assert!(!ok_vm.is_empty(), "{text}");
    assert!(
        text.contains("# TYPE kubevirt_operator_admission_duration_seconds histogram"),
        "{text}"
    );
    metrics::dashboard_queries_name_exported_metrics(&text);
    metrics::the_webhook_command_exports_the_same_admission_and_certificate_metrics(&text).await;
    eprintln!("metrics_and_probes: {:?}\n{joined}", started.elapsed());
}

/// Started before its namespace exists (RBAC or namespace applied late), the operator keeps
/// serving, says what is wrong, retries, and becomes ready once the namespace appears.
#[tokio::test]
async fn a_missing_operator_namespace_is_retried_until_it_appears() {
    let cp = Fixture::new().with_all_crds().shared().await;
    let admin = cp.admin_client().await;
    let op_ns = "late-operator-namespace";
    let (op, Ports { probes, .. }) = start_operator(cp, op_ns, "late", &[]).await;
    let log = cp.dir().join("late").join("operator.log");
    until("the leader election error in the log", &op, || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        async move { text.contains("leader election failed").then_some(()) }
    })
    .await;
    let (code, _) = until("/readyz", &op, || http_get(probes, "/readyz")).await;
    assert_eq!(code, 500, "not ready without a certificate");

    let mut ns = Namespace::default();
    ns.metadata.name = Some(op_ns.into());
    Api::<Namespace>::all(admin)
        .create(&PostParams::default(), &ns)
        .await
        .expect("operator namespace");
    until("/readyz 200 once the namespace exists", &op, || async {
        http_get(probes, "/readyz")
            .await
            .filter(|(code, _)| *code == 200)
    })
    .await;
}
