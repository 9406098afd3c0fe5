//! Shared by the restore trust e2e tests: a restore held past its commit point, a user who may
//! only create claims, and the claims she plants.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::restore::{kubevirt_completes, kubevirt_restores, stopped_for};
use super::{NS, dynamic, eventually};
use crate::access::{self, rule};
use crate::support::{self, Fixture};
use kubevirt_operator::api::snapshots::MachineRestore;

pub const HOLD: &str = "test.vitistack.io/hold";

pub async fn hold(pvcs: &Api<PersistentVolumeClaim>, name: &str) {
    let patch = json!({"metadata": {"finalizers": [HOLD]}});
    pvcs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("finalizer");
}

pub async fn release(pvcs: &Api<PersistentVolumeClaim>, name: &str) {
    let patch = json!({"metadata": {"finalizers": null}});
    pvcs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("finalizer gone");
}

/// Restore `name` of `web` to `web-before`, past its commit point: the old `web-root` is being
/// deleted (held by a finalizer of the test, so the restore waits there, in `Adopting`).
pub async fn adopting_held(
    admin: &Client,
    op: &support::Proc,
    restore: Value,
    name: &str,
) -> Vec<(String, String)> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    hold(&pvcs, "web-root").await;
    let obj: kube::api::DynamicObject = serde_json::from_value(restore).expect("restore");
    dynamic::<MachineRestore>(admin)
        .create(&PostParams::default(), &obj)
        .await
        .expect("MachineRestore");
    stopped_for(admin, op, name).await;
    let (_, restored) = kubevirt_restores(admin, op, name, &[]).await;
    kubevirt_completes(admin, name, &restored).await;
    eventually("the old web-root deleted", op, || async {
        let c = pvcs.get(name_of("root")).await.ok()?;
        c.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    restored
}

/// Waits for `f` while no operator runs.
pub async fn unwatched<T, F: Future<Output = Option<T>>>(what: &str, f: impl FnMut() -> F) -> T {
    support::eventually_with(access::WAIT, what, String::new, f).await
}

pub fn name_of(disk: &str) -> &'static str {
    if disk == "root" {
        "web-root"
    } else {
        "web-data"
    }
}

pub fn data_source(c: &PersistentVolumeClaim) -> Option<String> {
    Some(c.spec.as_ref()?.data_source.as_ref()?.name.clone())
}

/// The user of [`mallory`].
pub const MALLORY: &str = "mallory";

/// `fixture` with a user who may only create claims in the namespace.
pub fn mallory(fixture: Fixture) -> Fixture {
    fixture.user(MALLORY, &[]).grant(
        NS,
        MALLORY,
        vec![rule("", "persistentvolumeclaims", &["create"])],
    )
}

/// Mallory's claim `name`: her own data (no snapshot behind it), with `annotations` copied.
pub fn planted(name: &str, annotations: Value, labels: Value) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "annotations": annotations, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim")
}

/// The operator may make Pods in any namespace (its ClusterRole): it made only the consumer Pod
/// `name`, in the Machine's namespace, read and deleted only it, and never patched, updated or
/// watched a Pod; the ClusterRole grants no more on Pods. The operator runs as the admin here,
/// as does the storage this test plays, whose list of Pods in the namespace is the only other
/// Pod request of that user (kube-apiserver's own informers are left out).
pub fn only_its_consumer_pod(cp: &crate::support::ControlPlane, name: &str) {
    let pod_requests: Vec<_> = (cp.audited_requests().expect("audit log").into_iter())
        .filter(|r| r.resource == "pods" && r.api_group.is_empty() && r.user == ADMIN_USER)
        .collect();
    let made = (pod_requests.iter()).filter(|r| r.verb == "create" && r.code < 300);
    assert!(made.count() > 0, "the consumer Pod's create audited");
    for r in &pod_requests {
        match r.verb.as_str() {
            "create" | "delete" | "get" => {
                assert_eq!((r.namespace.as_str(), r.name.as_str()), (NS, name), "{r:?}")
            }
            "list" => assert_eq!(r.namespace, NS, "{r:?}"),
            _ => panic!("a Pod request beyond get, create and delete: {r:?}"),
        }
    }
    let role = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/rbac/cluster_role.yaml"),
    )
    .expect("cluster role");
    let role: k8s_openapi::api::rbac::v1::ClusterRole =
        serde_yaml::from_str(&role).expect("ClusterRole YAML");
    let on_pods: Vec<Vec<String>> = (role.rules.iter().flatten())
        .filter(|r| r.resources.iter().flatten().any(|x| x == "pods"))
        .map(|r| r.verbs.clone())
        .collect();
    assert_eq!(on_pods, [["get", "create", "delete"]]);
}

/// The admin's identity (the control plane's client certificate), which the operator runs as in
/// these tests.
const ADMIN_USER: &str = "kubernetes-admin";
