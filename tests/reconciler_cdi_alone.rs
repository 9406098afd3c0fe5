//! Issue 12 on control planes of their own: without CDI's CRDs, and with an operator that never
//! resyncs within the test, so only its DataVolume watch can carry CDI's progress to the Machine.

mod cdi;
mod operator;
mod ownership;
mod support;

use std::path::PathBuf;

use serde_json::json;

use cdi::{IMAGE, all_crds, cdi_status, dv_ar};
use operator::{OPERATOR_USER, Operator, operator_user};
use ownership::*;
use support::ControlPlane;

async fn alone(crds: &[PathBuf], name: &str, extra: &[&str]) -> (ControlPlane, Operator, Env) {
    let cp = ControlPlane::start().await.expect("control plane");
    cp.install_crds(crds).await.expect("CRDs");
    let admin = cp.client().await.expect("admin client");
    let user = operator_user(&cp, &admin, OPERATOR_USER).await;
    let op = Operator::start(&cp, &user, name, extra);
    let env = Env {
        client: admin,
        ns: cp.namespace(name).await.expect("namespace"),
        operator_log: op.proc.log.clone(),
    };
    (cp, op, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_volume_progress_reaches_the_machine_through_the_watch() {
    // Far beyond the test's waits (45 s): a resync cannot be what carries the change.
    let (_cp, _op, env) = alone(&all_crds(), "dv-watch", &["--reconcile-interval", "10m"]).await;
    env.machine(
        "w",
        json!({"template": "small", "disks": [{"name": "root", "size": "2Gi", "source": {"http": {"url": IMAGE}}}]}),
    )
    .await;
    env.wait_for(&dv_ar(), "w-root").await;
    env.wait_condition("w", "StorageReady", "False", "DataVolumePending")
        .await;
    cdi_status(
        &env,
        "w-root",
        json!({"phase": "ImportInProgress", "progress": "12.00%"}),
    )
    .await;
    let message = env
        .wait_condition("w", "StorageReady", "False", "ImportInProgress")
        .await;
    assert_eq!(message, "disk root: ImportInProgress 12.00%");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cdi_the_operator_is_ready_and_only_machines_with_sources_wait() {
    let crds: Vec<PathBuf> = all_crds()
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("cdi.kubevirt.io"))
        .collect();
    let (_cp, op, env) = alone(&crds, "no-cdi", &[]).await;
    env.until("/readyz 200 without the DataVolume CRD", || async {
        (op.readyz().await == Some(200)).then_some(())
    })
    .await;
    env.machine("plain", json!({"template": "small"})).await;
    env.machine(
        "imaged",
        json!({"template": "small", "disks": [{"name": "root", "size": "2Gi", "source": {"http": {"url": IMAGE}}}]}),
    )
    .await;
    env.wait_for(&vm_ar(), "plain").await;
    env.wait_phase("plain", "Creating").await;
    let message = env
        .wait_condition("imaged", "StorageReady", "False", "CDINotInstalled")
        .await;
    assert!(message.contains("disk root"), "{message}");
}
