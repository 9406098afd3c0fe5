//! Issue 22 end to end on two real control planes: the management one (with the garbage
//! collector) runs `kubevirt-operator run` and holds Machines, the KubevirtConfig `dc1` and its
//! kubeconfig Secret; the remote one has KubeVirt's and CDI's real CRDs and nothing of ours.
//!
//! A kubeconfig the remote refuses shows `ClusterReady=False` and is rotated to a good one without
//! a restart. Machines are placed by annotation, locally, and (after a restart with
//! `--default-kubevirt-config`) by default; their objects appear on their cluster only, with no
//! owner reference there (attachments carry their NetworkConfiguration's proof); clones from
//! another namespace there need the KubevirtConfig's consent; status flows back when the test plays KubeVirt on the remote; moving a
//! Machine is refused; the remote API server stopped gives `ClusterReady=False` and loses
//! nothing, and work resumes when it is back; deletion cleans the remote up (keeping disks under
//! retain-disks), waits while the cluster is away, and goes under `vitistack.io/abandon-remote`.

mod access;
mod kubevirt;
mod support;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Client;
use kube::api::Api;
use serde_json::{Value, json};

use access::{WAIT, create_admitted, machines, start_operator};
use kubevirt_operator::api::MachineStatus;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use support::{ControlPlane, Fixture, Proc, eventually_with};

const NS: &str = "team-a";
const OP_NS: &str = "access-operator";

fn machine(name: &str, annotations: Value) -> kube::api::DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"template": "small"}
    }))
    .expect("machine")
}

async fn create(admin: &Client, op: &Proc, name: &str, annotations: Value) {
    create_admitted(&machines(admin, NS), &machine(name, annotations), op).await;
}

fn condition<'s>(s: &'s MachineStatus, type_: &str) -> Option<(&'s str, &'s str)> {
    let c = s.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.as_str(), c.reason.as_str()))
}

async fn vm(client: &Client, name: &str) -> Option<VirtualMachine> {
    Api::<VirtualMachine>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

async fn claim(client: &Client, name: &str) -> Option<PersistentVolumeClaim> {
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

/// Waits until `f` yields, failing with the operator's log.
async fn until<T, F, Fut>(op: &Proc, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_with(WAIT, what, || op.log_tail(60), f).await
}

async fn start(mgmt: &ControlPlane, extra: &[&str]) -> Proc {
    let mut args = vec![
        "--kubevirt-config-probe-interval",
        "1s",
        "--allowed-bridges",
        "br0",
    ];
    args.extend_from_slice(extra);
    start_operator(mgmt, OP_NS, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_live_on_the_cluster_they_name() {
    let (mgmt, mut remote) = tokio::join!(
        Fixture::new()
            .with_all_crds()
            .with_controller_manager()
            .namespace(OP_NS)
            .namespace(NS)
            .start(),
        Fixture::new().with_fixture_crds().start()
    );
    let admin = mgmt.admin_client().await;
    let far_admin = remote.admin_client().await;
    placement::dc1(&admin, &remote).await;
    // Started after dc1 is made: its start-up reads a KubevirtConfig whose kubeconfig is still
    // to fix.
    let mut op = start(&mgmt, &[]).await;
    let far_vm = placement::placed(&admin, &far_admin, &remote, &op).await;
    placement::status_flows_back(&admin, &far_admin, &op).await;
    placement::moves_refused(&admin).await;
    objects::clones(&admin, &far_admin, &op).await;
    objects::networks(&admin, &far_admin, &op).await;
    objects::cloud_init(&admin, &far_admin, &op).await;
    objects::counted(&admin, &op).await;
    let far_admin = outage::away_and_back(&admin, &mut remote, &op, &far_vm).await;
    outage::deletion(&admin, &far_admin, &op).await;
    // Placed by default: a Machine without the annotation goes to dc1; near stays local.
    op.kill();
    let op = start(&mgmt, &["--default-kubevirt-config", "dc1"]).await;
    outage::placed_by_default(&admin, &far_admin, &op).await;
    outage::abandoned(&admin, &mut remote, &op).await;
    outage::config_deleted(&admin, &op).await;
}

/// The test's parts, in tests/remote_clusters_e2e/ (still one test binary).
mod remote_clusters_e2e {
    pub mod objects;
    pub mod outage;
    pub mod placement;
}
use remote_clusters_e2e::{objects, outage, placement};
