//! The released operator outside the cluster, reached as in one: kube-apiserver calls the chart's
//! webhook configurations, which name the webhook Service on port 443. With no kube-proxy here,
//! the Service is made an ExternalName for a loopback address, where the operator listens on
//! 443 (this plays kube-proxy, nothing else: the configurations stay as the chart installed
//! them). The operator gets the Deployment's own environment, so the names the chart passes are
//! the ones tested. Also the chart's `helm test` Pod, run here by playing the kubelet.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{SERVICE_ACCOUNT, impersonating_kubeconfig_for};
use crate::chart::NAMESPACE;
use crate::support::{self, ControlPlane, Proc};

/// Where kube-apiserver reaches the webhook Service (port 443, as the configurations say).
pub const WEBHOOK_ADDRESS: &str = "127.0.0.43";

/// Makes the Service `name` an ExternalName for [`WEBHOOK_ADDRESS`] (kube-apiserver dials it;
/// the serving certificate is still checked for `name.namespace.svc`).
pub async fn route_webhook_service(client: &kube::Client, name: &str) {
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let patch = json!({"spec": {"type": "ExternalName", "externalName": WEBHOOK_ADDRESS,
        "clusterIP": null, "clusterIPs": null}});
    services
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("routing Service {name} to {WEBHOOK_ADDRESS}: {e}"));
}

/// The Deployment's plain environment (values, not references), and NAMESPACE as the pod's.
pub fn deployment_env(d: &Deployment) -> Vec<(String, String)> {
    let container = &d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod")
        .containers[0];
    let mut env: Vec<(String, String)> = container
        .env
        .iter()
        .flatten()
        .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
        .collect();
    env.push(("NAMESPACE".into(), NAMESPACE.into()));
    env
}

/// `kubevirt-operator run` as the chart's ServiceAccount with the chart's Deployment
/// environment, its webhooks on [`WEBHOOK_ADDRESS`]:443; returns it and its probes port.
pub async fn launch(cp: &ControlPlane, client: &kube::Client, extra: &[&str]) -> (Proc, u16) {
    let d = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get(SERVICE_ACCOUNT)
        .await
        .expect("the chart's Deployment");
    let kubeconfig = impersonating_kubeconfig_for(cp, SERVICE_ACCOUNT);
    let probes = support::free_port().expect("port");
    let dir = cp.dir().join("chart-operator");
    std::fs::create_dir_all(&dir).expect("dir");
    let args: Vec<OsString> = [
        "run",
        "--kubeconfig",
        &kubeconfig.display().to_string(),
        "--listen",
        &format!("{WEBHOOK_ADDRESS}:443"),
        "--metrics-bind-address",
        "127.0.0.1:0",
        "--health-probe-bind-address",
        &format!("127.0.0.1:{probes}"),
        "--reconcile-interval",
        "2s",
    ]
    .iter()
    .chain(extra)
    .map(OsString::from)
    .collect();
    let mut env = deployment_env(&d);
    env.push(("LOG_FORMAT".into(), "json".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let proc = Proc::spawn_with_env(
        "kubevirt-operator",
        Path::new(env!("CARGO_BIN_EXE_kubevirt-operator")),
        args,
        &env,
        dir.join("operator.log"),
    )
    .expect("spawn operator");
    (proc, probes)
}

pub async fn ready(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    if s.write_all(b"GET /readyz HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200")
}

/// Plays the kubelet for the release's `helm test` Pods until `done` says stop: each new test
/// Pod's container runs here (this build of the operator's binary, standing in for its image,
/// with the Pod's args, as the Pod's ServiceAccount) and its phase is set from the exit status.
/// Returns what each run printed.
pub async fn play_kubelet(
    cp: &ControlPlane,
    client: &kube::Client,
    done: impl Fn() -> bool,
) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut outputs = Vec::new();
    let mut ran: Vec<String> = Vec::new();
    while !done() {
        let listed = pods.list(&Default::default()).await.expect("pods");
        for pod in listed.items {
            let is_test = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("helm.sh/hook"))
                == Some(&"test".to_owned());
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if !is_test || ran.contains(&uid) {
                continue;
            }
            ran.push(uid);
            let name = pod.metadata.name.clone().expect("name");
            let spec = pod.spec.expect("spec");
            let sa = spec
                .service_account_name
                .clone()
                .expect("its own ServiceAccount");
            let container = &spec.containers[0];
            let kubeconfig = impersonating_kubeconfig_for(cp, &sa);
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
                .args(container.args.iter().flatten())
                .env("KUBECONFIG", &kubeconfig)
                .env("LOG_FORMAT", "text")
                .output()
                .await
                .expect("run the test container");
            let phase = if out.status.success() {
                "Succeeded"
            } else {
                "Failed"
            };
            outputs.push(format!(
                "{name} ({sa}, image {:?}): {phase}\n{}{}",
                container.image,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            pods.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": phase}})),
            )
            .await
            .expect("Pod status");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    outputs
}
