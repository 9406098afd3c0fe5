//! The walk's second part: KubeVirt's VMIs come and go, a snapshot and a failed restore, a
//! NetworkConfiguration deleted, certificates rotated and a caBundle tampered with, and the
//! Machines deleted.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::operator::eventually;
use crate::support::{OPERATOR_NAMESPACE, Proc, Started, events_about};
use crate::{WAIT, condition_reason, dynamic, get, log, phase};
use kubevirt_operator::api::{Machine, MachineRestore, MachineSnapshot, NetworkConfiguration};
use kubevirt_operator::certs::{BUNDLE_CONFIGMAP, BUNDLE_KEY, WEBHOOK_CONFIGURATION};
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use kubevirt_operator::reconciler::apis::snapshot::{
    VirtualMachineRestore, VirtualMachineSnapshot, VirtualMachineSnapshotContent,
};

/// Plays KubeVirt: a VMI for alpha, running, then gone, twice: KubeVirt deletes the first, the
/// operator the second (a restart asked by `vitistack.io/restarted-at`).
pub async fn vmis(admin: &Client, ns: &str) {
    // KubeVirt's part: a VMI for alpha, running, then gone; twice, so that the repeated
    // "Running" Event is patched (a series) rather than created.
    let machines: Api<Machine> = Api::namespaced(admin.clone(), ns);
    let vmis = dynamic(
        admin,
        ns,
        &ApiResource::erase::<VirtualMachineInstance>(&()),
    );
    // KubeVirt's VMIs are controlled by their VM; only such a VMI feeds the Machine's status.
    let vm_uid = dynamic(admin, ns, &ApiResource::erase::<VirtualMachine>(&()))
        .get("alpha")
        .await
        .expect("alpha's VM")
        .metadata
        .uid;
    for round in 0..2 {
        let vmi: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "alpha", "labels": {
                "vitistack.io/machine": "alpha", "vitistack.io/managed-by": "kubevirt-operator"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                    "name": "alpha", "uid": vm_uid, "controller": true}]},
            "spec": {"domain": {"devices": {}}}
        }))
        .expect("VMI");
        vmis.create(&PostParams::default(), &vmi)
            .await
            .expect("create VMI");
        vmis.patch_status(
            "alpha",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "nodeName": "node-a"}})),
        )
        .await
        .expect("VMI status");
        eventually(WAIT, "alpha Running", || async {
            (phase(&machines, "alpha").await.as_deref() == Some("Running")).then_some(())
        })
        .await;
        if round == 0 {
            vmis.delete("alpha", &DeleteParams::default())
                .await
                .expect("delete VMI");
        } else {
            // A restart asked for after the VMI started (a second ahead: creation times are
            // whole seconds): the operator deletes that VMI.
            let at = k8s_openapi::jiff::Timestamp::now()
                + k8s_openapi::jiff::SignedDuration::from_secs(2);
            let restart = json!({"metadata": {"annotations": {
                kubevirt_operator::api::names::RESTARTED_AT_ANNOTATION:
                    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}}});
            machines
                .patch("alpha", &PatchParams::default(), &Patch::Merge(restart))
                .await
                .expect("restarted-at");
            eventually(WAIT, "alpha's VMI deleted by the restart", || async {
                vmis.get_opt("alpha").await.ok()?.is_none().then_some(())
            })
            .await;
        }
        eventually(WAIT, "alpha no longer Running", || async {
            (phase(&machines, "alpha").await.as_deref() != Some("Running")).then_some(())
        })
        .await;
    }
}

/// A snapshot of alpha KubeVirt reports taken, and a restore from it KubeVirt fails.
pub async fn snapshot_and_restore(admin: &Client, ns: &str) {
    // Issue 21: a snapshot of alpha, KubeVirt's snapshot controller reporting it taken, and a
    // restore from it that KubeVirt fails (the VM is stopped, the VirtualMachineRestore made).
    let snapshot_ar = ApiResource::erase::<MachineSnapshot>(&());
    let restore_ar = ApiResource::erase::<MachineRestore>(&());
    let snap: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": "alpha-snap"}, "spec": {"machineName": "alpha"}
    }))
    .expect("MachineSnapshot");
    dynamic(admin, ns, &snapshot_ar)
        .create(&PostParams::default(), &snap)
        .await
        .expect("MachineSnapshot");
    let vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(admin.clone(), ns);
    eventually(WAIT, "the VirtualMachineSnapshot", || async {
        get(&vmsnaps, "alpha-snap").await.map(drop)
    })
    .await;
    vmsnaps
        .patch_status(
            "alpha-snap",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded", "readyToUse": true,
                "virtualMachineSnapshotContentName": "alpha-snap-content"}})),
        )
        .await
        .expect("VirtualMachineSnapshot status");
    let msnaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), ns);
    eventually(WAIT, "alpha-snap ready", || async {
        let s = get(&msnaps, "alpha-snap").await?.status?;
        (s.ready_to_use == Some(true)).then_some(())
    })
    .await;
    clone_of_snapshot(admin, ns).await;
    let undo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineRestore",
        "metadata": {"name": "alpha-undo"},
        "spec": {"machineName": "alpha", "snapshotName": "alpha-snap"}
    }))
    .expect("MachineRestore");
    dynamic(admin, ns, &restore_ar)
        .create(&PostParams::default(), &undo)
        .await
        .expect("MachineRestore");
    let vmrestores: Api<VirtualMachineRestore> = Api::namespaced(admin.clone(), ns);
    eventually(WAIT, "the VirtualMachineRestore", || async {
        get(&vmrestores, "alpha-undo").await.map(drop)
    })
    .await;
    vmrestores
        .patch_status(
            "alpha-undo",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"complete": false, "conditions": [
                {"type": "Failure", "status": "True", "message": "no VolumeSnapshotClass"}]}})),
        )
        .await
        .expect("VirtualMachineRestore status");
    let mrestores: Api<MachineRestore> = Api::namespaced(admin.clone(), ns);
    eventually(WAIT, "alpha-undo Failed", || async {
        let s = get(&mrestores, "alpha-undo").await?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(())
    })
    .await;
}

/// Issue 35: a clone of alpha-snap, dry run (the webhooks run, nothing is stored): the mutating
/// webhook reads the snapshot's content for each disk's VolumeSnapshot.
async fn clone_of_snapshot(admin: &Client, ns: &str) {
    let content: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshotContent",
        "metadata": {"name": "alpha-snap-content"},
        "spec": {"source": {"virtualMachine": {"metadata": {"name": "alpha"}, "spec": {"template": {}}}},
                 "virtualMachineSnapshotName": "alpha-snap",
                 "volumeBackups": [
                     {"volumeName": "root", "volumeSnapshotName": "alpha-snap-root",
                      "persistentVolumeClaim": {"metadata": {"name": "alpha-root"}, "spec": {}}},
                     {"volumeName": "data", "volumeSnapshotName": "alpha-snap-data",
                      "persistentVolumeClaim": {"metadata": {"name": "alpha-data"}, "spec": {}}}]}}))
    .expect("content");
    let contents_ar = ApiResource::erase::<VirtualMachineSnapshotContent>(&());
    dynamic(admin, ns, &contents_ar)
        .create(&PostParams::default(), &content)
        .await
        .expect("VirtualMachineSnapshotContent");
    let copy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "alpha-copy"},
        "spec": {"cloneFrom": {"snapshot": "alpha-snap"}, "runStrategy": "Halted"}
    }))
    .expect("Machine");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let made = dynamic(admin, ns, &ApiResource::erase::<Machine>(&()))
        .create(&dry, &copy)
        .await
        .expect("a clone of alpha-snap admitted");
    assert_eq!(
        made.data.pointer("/spec/disks/0/source/snapshot/name"),
        Some(&json!("alpha-snap-root")),
        "{:?}",
        made.data
    );
}

/// NetworkConfiguration `lan` deleted under its Machines.
pub async fn network_gone(admin: &Client, ns: &str) {
    let ncs: Api<NetworkConfiguration> = Api::namespaced(admin.clone(), ns);
    let machines: Api<Machine> = Api::namespaced(admin.clone(), ns);
    // The NetworkConfiguration goes: its Machines report it, in their status and an Event.
    ncs.delete("lan", &DeleteParams::default())
        .await
        .expect("delete NC");
    eventually(WAIT, "gamma to miss its NetworkConfiguration", || async {
        let m = get(&machines, "gamma").await?;
        (condition_reason(&m, "NetworkReady").as_deref() == Some("NetworkConfigurationNotFound"))
            .then_some(())
    })
    .await;
    eventually(
        WAIT,
        "an Event about gamma's missing NetworkConfiguration",
        || async {
            let events = events_about(admin, ns, "gamma").await;
            let found =
                (events.iter()).any(|(_, reason, _)| reason == "NetworkConfigurationNotFound");
            found.then_some(())
        },
    )
    .await;
}

/// A CA rotation on demand, and a tampered caBundle put back.
pub async fn certificates(cp: &Started, admin: &Client, op: &Proc) {
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    // Certificates: a CA rotation on demand (as the admin), and a tampered caBundle put back.
    let cli = {
        let kubeconfig = cp.admin_kubeconfig().to_owned();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
                .args(["certs", "rotate", "--ca", "--timeout", "90s"])
                .env("KUBECONFIG", kubeconfig)
                .env("NAMESPACE", OPERATOR_NAMESPACE)
                .env("LOG_FORMAT", "text")
                .output()
        })
        .await
        .expect("join")
        .expect("run certs rotate")
    };
    assert!(
        cli.status.success(),
        "certs rotate --ca: {}\n{}\n{}",
        String::from_utf8_lossy(&cli.stdout),
        String::from_utf8_lossy(&cli.stderr),
        log(op)
    );
    let tampered = ByteString(b"tampered".to_vec());
    mutating
        .patch(
            WEBHOOK_CONFIGURATION,
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "replace",
                    "path": "/webhooks/0/clientConfig/caBundle", "value": tampered}]))
                .expect("json patch"),
            ),
        )
        .await
        .expect("tamper caBundle");
    let bundles: Api<ConfigMap> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    eventually(WAIT, "the caBundle to be restored", || async {
        let live = get(&mutating, WEBHOOK_CONFIGURATION).await?;
        let pem = get(&bundles, BUNDLE_CONFIGMAP)
            .await?
            .data?
            .remove(BUNDLE_KEY)?;
        let ca = live.webhooks?.first()?.client_config.ca_bundle.clone()?;
        (ca.0 == pem.as_bytes()).then_some(())
    })
    .await;
}

/// Every Machine deleted, and what goes with it.
pub async fn deletions(admin: &Client, ns: &str) {
    let machines: Api<Machine> = Api::namespaced(admin.clone(), ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), ns);
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(admin.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
    // Deletions: alpha (disks deleted), beta (disks retained), gamma (last user of the NAD),
    // delta (its DataVolume deleted).
    for name in ["alpha", "beta", "gamma", "delta"] {
        machines
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete Machine");
    }
    for name in ["alpha", "beta", "gamma", "delta"] {
        eventually(WAIT, &format!("Machine {name} to go"), || async {
            machines
                .get_opt(name)
                .await
                .ok()
                .and_then(|m| m.is_none().then_some(()))
        })
        .await;
    }
    assert!(
        get(&pvcs, "alpha-data").await.is_none(),
        "alpha's disks deleted"
    );
    assert!(
        get(&pvcs, "beta-data").await.is_some(),
        "beta's disks retained"
    );
    assert!(get(&secrets, "alpha-cloudinit").await.is_none());
    eventually(WAIT, "NAD lan to go", || async {
        nads.get_opt("lan")
            .await
            .ok()
            .and_then(|n| n.is_none().then_some(()))
    })
    .await;
}
