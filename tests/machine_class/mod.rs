//! Shared by the MachineClass end-to-end tests: a dedicated control plane with the CRDs, the
//! objects, the replicas' webhooks asked directly, and what the reconciler wrote.

#![allow(dead_code)] // Not every test uses every helper.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error, ResourceExt};
use serde_json::{Value, json};

use crate::access::WAIT;
use crate::support::{Fixture, Proc, eventually};
use kubevirt_operator::admission::MUTATE_PATH;
use kubevirt_operator::api::MachineClass;
use kubevirt_operator::certs::{BUNDLE_CONFIGMAP, BUNDLE_KEY};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

pub const OP_NS: &str = "access-operator";
pub const NS: &str = "team-a";
/// The operators' resync (`access::start_replica` passes `--reconcile-interval 2s`).
pub const RESYNC: Duration = Duration::from_secs(2);

/// A control plane of its own with every CRD and both namespaces; the tests start replicas.
pub fn fixture() -> Fixture {
    Fixture::new()
        .with_all_crds()
        .namespace(OP_NS)
        .namespace(NS)
}

pub fn classes(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<MachineClass>(&()))
}

pub fn class(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineClass",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("class")
}

pub fn machine(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("machine")
}

pub fn xlarge(cores: i64, memory: &str, root: &str) -> Value {
    json!({"displayName": "Extra large", "cpu": {"cores": cores}, "memory": {"size": memory},
           "disks": [{"name": "root", "size": root}],
           "limits": {"cpu": {"maxCores": 16}, "memory": {"max": "128Gi"}}})
}

/// The API server's refusal of `result`, by a webhook.
pub fn refusal<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Api(e)) if e.message.contains("admission webhook") => e.message,
        other => panic!("expected a webhook's refusal, got {other:?}"),
    }
}

/// Creates `obj`, retrying while `retry` holds for the refusal (the watch not there yet).
pub async fn create_when(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    retry: impl Fn(&str) -> bool,
) -> DynamicObject {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(&PostParams::default(), obj).await {
            Ok(o) => return o,
            Err(Error::Api(e)) if retry(&e.message) && Instant::now() < deadline => {}
            Err(e) => panic!("creating {}: {e}", obj.name_any()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn cores(m: &DynamicObject) -> Option<i64> {
    m.data["spec"]["resources"]["cpu"]["cores"].as_i64()
}

/// A client that trusts the operator's published CA bundle, to ask each replica directly.
pub async fn replica_client(admin: &Client) -> reqwest::Client {
    let bundle = eventually(WAIT, "the CA bundle", || async {
        let cm = Api::<ConfigMap>::namespaced(admin.clone(), OP_NS)
            .get_opt(BUNDLE_CONFIGMAP)
            .await
            .ok()??;
        cm.data?.get(BUNDLE_KEY).cloned()
    })
    .await;
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .https_only(true)
        .no_proxy();
    for cert in reqwest::Certificate::from_pem_bundle(bundle.as_bytes()).expect("bundle") {
        builder = builder.add_root_certificate(cert);
    }
    builder.build().expect("client")
}

/// The mutating webhook of the replica on `port`, asked about a new Machine of `template`: the
/// cores it gets, or why not.
pub async fn cores_on(client: &reqwest::Client, port: u16, template: &str) -> Result<i64, String> {
    let kind = json!({"group": "vitistack.io", "version": "v1alpha1", "kind": "Machine"});
    let object = json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                        "metadata": {"name": "probe", "namespace": NS},
                        "spec": {"template": template}});
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "probe", "kind": kind, "name": "probe", "namespace": NS,
                    "operation": "CREATE", "userInfo": {"username": "admin"}, "object": object}});
    let url = format!("https://127.0.0.1:{port}{MUTATE_PATH}");
    let answer: Value = (client.post(url).json(&review).send().await)
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let response = &answer["response"];
    if response["allowed"] != true {
        return Err(response["status"]["message"].to_string());
    }
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().unwrap_or_default())
        .map_err(|e| e.to_string())?;
    let ops: Value = serde_json::from_slice(&patch).map_err(|e| e.to_string())?;
    ops[0]["value"]["resources"]["cpu"]["cores"]
        .as_i64()
        .ok_or_else(|| format!("no cores in {ops}"))
}

/// A name no earlier attempt used.
pub fn fresh_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{prefix}-{}", N.fetch_add(1, Ordering::Relaxed))
}

pub fn stop(procs: Vec<Proc>) {
    for mut p in procs {
        p.kill();
    }
}

/// resourceVersions of the VM and claims of `machine`.
pub async fn made_for(admin: &Client, machine: &str) -> Vec<(String, String)> {
    let vm = Api::<VirtualMachine>::namespaced(admin.clone(), NS)
        .get(machine)
        .await
        .expect("VM");
    let pvc = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NS)
        .get(&format!("{machine}-root"))
        .await
        .expect("root claim");
    vec![
        (vm.name_any(), vm.resource_version().unwrap_or_default()),
        (pvc.name_any(), pvc.resource_version().unwrap_or_default()),
    ]
}

/// After a metadata change (the reconciler looks again) and a few resyncs: no write to the VM or
/// the claim, and no complaint about the class in the Machine's status.
pub async fn still_as_made(
    api: &Api<DynamicObject>,
    admin: &Client,
    before: &[(String, String)],
    what: &str,
) {
    let touch = json!({"metadata": {"labels": {"touched": what}}});
    api.patch("db", &PatchParams::default(), &Patch::Merge(touch))
        .await
        .expect("label");
    tokio::time::sleep(RESYNC * 3).await;
    assert_eq!(
        made_for(admin, "db").await,
        before,
        "class {what}: db's VM or claim was written"
    );
    let db = api.get("db").await.expect("db");
    let status = &db.data["status"];
    assert_ne!(status["phase"], "Failed", "class {what}: {status}");
    let reasons: Vec<&str> = (status["conditions"].as_array().into_iter().flatten())
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(
        !reasons.contains(&"TemplateNotFound") && !reasons.contains(&"InvalidSpec"),
        "class {what}: {status}"
    );
}
