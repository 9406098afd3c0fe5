//! Least privilege, proven from the API server's audit log: `kubevirt-operator run` (self-managed
//! certificates, leader election on) runs on a dedicated control plane as a user bound to exactly
//! `manifests/rbac/cluster_role.yaml`, `leader_election_role.yaml`, `certificates_role.yaml`,
//! `ownership_key_role.yaml` and `kubevirt_config_role.yaml`,
//! through a scenario that walks the operator's code paths. Then, for that user's requests:
//! (a) none was forbidden (a grant is missing), and (b) every (apiGroup, resource, verb) the
//! manifests grant was used at least once (a grant is superfluous), except a short, checked list
//! of grants this API server cannot exercise.
//!
//! A grant of a namespaced Role counts as used by a request in the Role's namespace; a grant of
//! the ClusterRole only by a request no Role would have allowed (so the ClusterRole's `secrets`
//! rule must be needed for the Machines' namespaces, not just overlap with the certificates).

mod operator;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use kubevirt_operator::api::Machine;
use support::{Fixture, Proc};

const USER: &str = "rbac-least-privilege";
const WAIT: Duration = Duration::from_secs(60);

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn yaml<T: serde::de::DeserializeOwned>(path: &str) -> T {
    serde_yaml::from_str(&std::fs::read_to_string(manifest(path)).expect(path)).expect(path)
}

async fn create<K>(api: &Api<K>, obj: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", obj.name_any()));
}

fn dynamic(client: &Client, ns: &str, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, ar)
}

async fn create_machine(client: &Client, ns: &str, object: Value) -> Result<(), String> {
    let mut object = object;
    object["apiVersion"] = "vitistack.io/v1alpha1".into();
    object["kind"] = "Machine".into();
    let obj: DynamicObject = serde_json::from_value(object).expect("machine object");
    dynamic(client, ns, &ApiResource::erase::<Machine>(&()))
        .create(&PostParams::default(), &obj)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

async fn get<K>(api: &Api<K>, name: &str) -> Option<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.ok().flatten()
}

async fn phase(machines: &Api<Machine>, name: &str) -> Option<String> {
    get(machines, name).await?.status?.phase
}

fn condition_reason(m: &Machine, type_: &str) -> Option<String> {
    m.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason.clone())
}

fn log(op: &Proc) -> String {
    op.log_tail(80)
}

/// The walk through the operator's code paths, then the audit log's verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_manifests_grant_exactly_what_the_operator_uses() {
    let started = Instant::now();
    let cp = Fixture::new().with_all_crds().user(USER, &[]).start().await;
    let admin = cp.admin_client().await;
    let granted = grants::bind_manifests(&admin).await;
    let mut op = start::operator(&cp, &admin).await;
    let ns = cp.namespace("rbac").await.expect("namespace");
    start::inputs(&admin, &ns).await;
    start::machines(&admin, &ns, &op).await;
    walk::vmis(&admin, &ns).await;
    walk::snapshot_and_restore(&admin, &ns).await;
    walk::network_gone(&admin, &ns).await;
    walk::certificates(&cp, &admin, &op).await;
    walk::deletions(&admin, &ns).await;
    // A window, not a wait for a state: an operator that would crash after the deletions.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(op.exited().is_none(), "the operator exited\n{}", log(&op));
    let operator_log = log(&op);
    op.kill();
    audit::check(&cp, &granted, &operator_log, started).await;
}

/// The grants, the walk and the audit, in tests/rbac_least_privilege/ (still one test binary).
mod rbac_least_privilege {
    pub mod audit;
    pub mod grants;
    pub mod start;
    pub mod walk;
}
use rbac_least_privilege::{audit, grants, start, walk};
