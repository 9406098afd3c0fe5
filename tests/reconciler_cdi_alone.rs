//! Issue 12 on control planes of their own: without CDI's CRDs; with CDI's but not StorageProfile's
//! (issue 33); with an operator that never
//! resyncs within the test, so only its DataVolume watch can carry CDI's progress to the Machine;
//! and what `make dev` applies (examples/setup/, then examples/) in the namespace it uses.

mod cdi;
mod ownership;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

use cdi::{IMAGE, all_crds, cdi_status, dv_ar};
use ownership::*;
use support::{Fixture, Started};

async fn alone(crds: Vec<PathBuf>, name: &str, extra: &[&str]) -> (Started, Env) {
    let started = Fixture::new()
        .with_crds(crds)
        .operator(name, extra)
        .start()
        .await;
    let env = Env::on(&started, name).await;
    (started, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_volume_progress_reaches_the_machine_through_the_watch() {
    // Far beyond the test's waits (45 s): a resync cannot be what carries the change.
    let (_started, env) = alone(all_crds(), "dv-watch", &["--reconcile-interval", "10m"]).await;
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
    let (started, env) = alone(crds, "no-cdi", &[]).await;
    let op = started.operator();
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

/// A partial install, each optional kind discovered on its own: KubeVirt's VirtualMachine and
/// VirtualMachineInstance CRDs but not its migrations' or snapshots'; CDI's DataVolume but not its
/// DataSource or StorageProfile (CDI releases before them, or a trimmed install); no
/// NetworkAttachmentDefinition CRD. The operator is ready, a plain Machine gets its VM, a Machine
/// with a disk source its DataVolume, and only a Machine with a network waits, saying why.
/// Before issue 33 the StorageProfile watch met 404 in a loop and `/readyz` never answered 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_storage_profile_crd_the_operator_is_ready_and_imports() {
    const SERVED: [&str; 3] = [
        "virtualmachines.kubevirt.io.yaml",
        "virtualmachineinstances.kubevirt.io.yaml",
        "datavolumes.cdi.kubevirt.io.yaml",
    ];
    let mut crds: Vec<PathBuf> = (support::crd_fixtures().expect("fixture CRDs").into_iter())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| SERVED.iter().any(|s| n == *s))
        })
        .collect();
    assert_eq!(crds.len(), SERVED.len(), "{crds:?}");
    crds.push(support::machine_crds());
    let (started, env) = alone(crds, "no-profiles", &[]).await;
    env.network_configuration("lan", "br0", 0).await;
    let op = started.operator();
    env.until(
        "/readyz 200 with a partial KubeVirt and CDI, no Multus",
        || async { (op.readyz().await == Some(200)).then_some(()) },
    )
    .await;
    env.machine("plain", json!({"template": "small"})).await;
    env.machine(
        "imaged",
        json!({"template": "small", "disks": [{"name": "root", "size": "2Gi", "source": {"http": {"url": IMAGE}}}]}),
    )
    .await;
    env.machine(
        "wired",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lan"}]}),
    )
    .await;
    env.wait_for(&vm_ar(), "plain").await;
    env.wait_phase("plain", "Creating").await;
    env.wait_for(&dv_ar(), "imaged-root").await;
    env.wait_condition("imaged", "StorageReady", "False", "DataVolumePending")
        .await;
    env.wait_condition("wired", "NetworkReady", "False", "MultusNotInstalled")
        .await;
}

/// What `make dev` shows: the golden image exists, every example is admitted, the four disk-image
/// Machines get their DataVolumes and wait at `DataVolumePending` (no CDI runs), the others
/// their claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_apply_as_make_dev_applies_them() {
    let (cp, mut env) = alone(all_crds(), "dev", &[]).await;
    let op = cp.operator();
    env.until("/readyz 200", || async {
        (op.readyz().await == Some(200)).then_some(())
    })
    .await;
    env.ns = "default".into();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    // As dev.rs does: the setup as it is, the examples into `default`.
    let apply = |args: &[&str], path: PathBuf| {
        let out = cp
            .kubectl()
            .expect("kubectl")
            .arg("apply")
            .args(args)
            .arg("-f")
            .arg(&path)
            .output()
            .expect("kubectl apply");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = apply(&[], examples.join("setup"));
    assert!(ok, "examples/setup: {err}");
    // Applied until it succeeds, as dev.rs does (there, the webhooks may not answer yet).
    let mut applied = apply(&["-n", "default"], examples.clone());
    for _ in 0..20 {
        if applied.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        applied = apply(&["-n", "default"], examples.clone());
    }
    assert!(applied.0, "examples/: {}", applied.1);

    let data_source = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataSource"),
        "datasources",
    );
    let golden: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "os-images", &data_source);
    golden
        .get("debian-12")
        .await
        .expect("the golden image's DataSource");
    for (machine, volumes) in [
        ("debian-vm", &["debian-vm-root"][..]),
        ("fedora-vm", &["fedora-vm-root"]),
        ("installer-vm", &["installer-vm-installer"]),
    ] {
        for dv in volumes {
            env.wait_for(&dv_ar(), dv).await;
        }
        env.wait_condition(machine, "StorageReady", "False", "DataVolumePending")
            .await;
    }
    // No webhook runs here (the operator serves a file certificate no configuration names), so
    // the golden clone was stored without the pin the mutating webhook writes: its DataSource is
    // not followed blindly (tests/access_paths_e2e.rs clones through a pin).
    env.wait_condition("golden-vm", "StorageReady", "False", "CloneSourceNotPinned")
        .await;
    for machine in ["basic-vm", "custom-vm", "networked-vm", "cloud-init-vm"] {
        env.wait_for(&vm_ar(), machine).await;
        env.wait_phase(machine, "Creating").await;
    }
}
