//! Issue 12 on the real control plane: Machines with disk images and CD-ROMs, against the
//! `kubevirt-operator run` binary as a user holding exactly `manifests/rbac/`, with CDI's real
//! DataVolume and DataSource CRDs and KubeVirt's VM CRD. The tests play CDI (DataVolume phases
//! and progress, then the claim it fills, bound) and KubeVirt (VMI, VM printableStatus), and
//! follow the Machine's status, conditions and Events through each step. DataVolumes follow
//! issue 11's ownership rules: one the operator did not make is a `DataVolumeConflict`, never
//! touched; retain-disks keeps a disk's DataVolume, released, for a Machine of that name.

mod cdi;
mod ownership;
mod support;

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use cdi::{IMAGE, cdi_status, dv_ar};
use ownership::*;

async fn env(prefix: &str) -> Env {
    shared_env("cdi", prefix).await
}

/// CDI's (and the volume controller's) part: the claim it fills, bound.
async fn bound_claim(env: &Env, name: &str, owner: Option<&Value>) {
    let mut meta = json!({"name": name});
    if let Some(dv) = owner {
        meta["ownerReferences"] = json!([{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
            "name": dv["metadata"]["name"], "uid": dv["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]);
        // CDI marks the claim it makes with its DataVolume's uid.
        meta["annotations"] =
            json!({"cdi.kubevirt.io/createdForDataVolume": dv["metadata"]["uid"]});
    }
    if env.get(&pvc_ar(), name).await.is_none() {
        env.create(
            &pvc_ar(),
            json!({"metadata": meta, "spec": {"accessModes": ["ReadWriteOnce"],
                   "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
    }
    env.api(&pvc_ar())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await
        .expect("claim status");
}

async fn disk_status(env: &Env, machine: &str, disk: &str, phase: &str) -> Value {
    env.until(
        &format!("Machine {machine}: status.disks {disk} phase {phase}"),
        || async {
            let m = env.get(&machine_ar(), machine).await?;
            m.pointer("/status/disks")?
                .as_array()?
                .iter()
                .find(|d| d["name"] == disk && d["phase"] == phase)
                .cloned()
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_disk_is_followed_from_import_to_running() {
    let env = env("cdi-import").await;
    let machine = env
        .machine(
            "deb",
            json!({"template": "small", "disks": [
                {"name": "root", "size": "20Gi", "source": {"http": {"url": IMAGE}}},
                {"name": "data", "size": "1Gi"}]}),
        )
        .await;

    // The DataVolume is the operator's, named like the claim; the blank disk stays a claim.
    let dv = env.wait_for(&dv_ar(), "deb-root").await;
    assert_eq!(controller_uid(&dv), Some(uid(&machine)));
    assert_eq!(dv.pointer("/spec/source/http/url"), Some(&json!(IMAGE)));
    assert_eq!(
        dv.pointer("/spec/storage/resources/requests/storage"),
        Some(&json!("20Gi"))
    );
    env.wait_for(&pvc_ar(), "deb-data").await;
    assert!(
        env.get(&pvc_ar(), "deb-root").await.is_none(),
        "CDI makes that claim, not the operator"
    );
    let vm = env.wait_for(&vm_ar(), "deb").await;
    assert_eq!(mounted_claims(&vm), ["deb-root", "deb-data"]);
    env.wait_condition("deb", "StorageReady", "False", "DataVolumePending")
        .await;

    cdi_status(
        &env,
        "deb-root",
        json!({"phase": "ImportScheduled", "progress": "N/A"}),
    )
    .await;
    env.wait_condition("deb", "StorageReady", "False", "ImportScheduled")
        .await;
    let (kind, _) = env.wait_event("deb", "ImportStarted").await;
    assert_eq!(kind, "Normal");

    cdi_status(
        &env,
        "deb-root",
        json!({"phase": "ImportInProgress", "progress": "45.20%"}),
    )
    .await;
    let message = env
        .wait_condition("deb", "StorageReady", "False", "ImportInProgress")
        .await;
    assert_eq!(message, "disk root: ImportInProgress 45.20%");
    let root = disk_status(&env, "deb", "root", "ImportInProgress").await;
    assert_eq!(
        root,
        json!({"name": "root", "claimName": "deb-root", "phase": "ImportInProgress", "progress": "45.20%",
               "accessMode": "ReadWriteOnce", "volumeMode": "Filesystem"})
    );

    bound_claim(&env, "deb-root", Some(&dv)).await;
    cdi_status(
        &env,
        "deb-root",
        json!({"phase": "Succeeded", "progress": "100.0%"}),
    )
    .await;
    env.wait_event("deb", "ImportSucceeded").await;
    bound_claim(&env, "deb-data", None).await;
    env.wait_condition("deb", "StorageReady", "True", "PVCBound")
        .await;
    disk_status(&env, "deb", "data", "Bound").await;

    env.api(&vm_ar())
        .patch_status(
            "deb",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"printableStatus": "Running"}})),
        )
        .await
        .expect("VM status");
    env.vmi("deb", "deb", Some(&vm), json!({"phase": "Running"}))
        .await;
    let m = env.wait_phase("deb", "Running").await;
    let m = if m.pointer("/status/vmStatus") == Some(&json!("Running")) {
        m
    } else {
        env.until("vmStatus Running", || async {
            let m = env.get(&machine_ar(), "deb").await?;
            (m.pointer("/status/vmStatus") == Some(&json!("Running"))).then_some(m)
        })
        .await
    };
    assert_eq!(condition(&m, "Ready").map(|c| c.0), Some("True".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_import_shows_import_failed_and_heals() {
    let env = env("cdi-fail").await;
    env.machine(
        "bad",
        json!({"template": "small", "disks": [{"name": "root", "size": "2Gi", "source": {"http": {"url": "https://example.invalid/missing.qcow2"}}}]}),
    )
    .await;
    env.wait_for(&dv_ar(), "bad-root").await;
    cdi_status(&env, "bad-root", json!({"phase": "ImportInProgress", "restartCount": 2, "conditions": [
        {"type": "Running", "status": "False", "reason": "Error", "message": "Unable to connect to http data source: 404 Not Found"}]})).await;
    let message = env
        .wait_condition("bad", "StorageReady", "False", "ImportFailed")
        .await;
    assert!(message.contains("404 Not Found"), "{message}");
    let (kind, note) = env.wait_event("bad", "ImportFailed").await;
    assert_eq!(kind, "Warning");
    assert!(note.contains("disk root"), "{note}");
    // CDI's retry succeeds: the Machine heals by itself.
    cdi_status(
        &env,
        "bad-root",
        json!({"phase": "ImportInProgress", "progress": "10.00%", "conditions": [
        {"type": "Running", "status": "True", "reason": "Pod is running"}]}),
    )
    .await;
    env.wait_condition("bad", "StorageReady", "False", "ImportInProgress")
        .await;

    // Without retain-disks a disk's DataVolume goes with its Machine, as a blank disk's claim.
    env.delete(&machine_ar(), "bad", &DeleteParams::background())
        .await;
    env.wait_gone(&machine_ar(), "bad").await;
    env.wait_gone(&dv_ar(), "bad-root").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdrom_is_a_read_only_sata_drive_booted_first() {
    let env = env("cdi-cdrom").await;
    env.machine(
        "inst",
        json!({"template": "small", "bootOrder": ["cdrom", "disk"],
               "cdroms": [{"name": "installer", "source": {"http": {"url": "https://cdimage.debian.org/netinst.iso"}}}]}),
    )
    .await;
    let dv = env.wait_for(&dv_ar(), "inst-installer").await;
    assert_eq!(
        dv.pointer("/spec/storage"),
        Some(&json!({"resources": {"requests": {"storage": "10Gi"}}}))
    );
    let vm = env.wait_for(&vm_ar(), "inst").await;
    let disks = vm
        .pointer("/spec/template/spec/domain/devices/disks")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        disks,
        json!([{"name": "root", "disk": {"bus": "virtio"}, "bootOrder": 2},
               {"name": "installer", "cdrom": {"bus": "sata", "readonly": true}, "bootOrder": 1}])
    );
    assert_eq!(mounted_claims(&vm), ["inst-root", "inst-installer"]);

    // The installer done: the CD-ROM removed, its DataVolume goes once the VM no longer has it.
    env.api(&machine_ar())
        .patch(
            "inst",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cdroms": null, "bootOrder": ["disk"]}})),
        )
        .await
        .expect("remove the CD-ROM");
    env.wait_gone(&dv_ar(), "inst-installer").await;
    let vm = env.get(&vm_ar(), "inst").await.expect("VM");
    assert_eq!(mounted_claims(&vm), ["inst-root"]);
    env.api(&machine_ar())
        .patch(
            "inst",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cdroms": [{"name": "installer2",
                "source": {"http": {"url": "https://cdimage.debian.org/netinst.iso"}}}]}})),
        )
        .await
        .expect("another CD-ROM");
    env.wait_for(&dv_ar(), "inst-installer2").await;

    // Deleted with the Machine (the finalizer, not the garbage collector, removes it).
    env.delete(&machine_ar(), "inst", &DeleteParams::default())
        .await;
    env.wait_gone(&machine_ar(), "inst").await;
    assert!(env.get(&dv_ar(), "inst-installer2").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_disks_keeps_the_data_volume_for_the_next_machine_of_that_name() {
    let env = env("cdi-retain").await;
    let spec = json!({"template": "small", "disks": [
        {"name": "root", "size": "2Gi", "source": {"http": {"url": IMAGE}}}],
        "cdroms": [{"name": "iso", "source": {"http": {"url": "https://example.org/netinst.iso"}}}]});
    env.create(
        &machine_ar(),
        json!({"metadata": {"name": "keep", "annotations": {RETAIN_DISKS: "true"}}, "spec": spec}),
    )
    .await;
    env.wait_for(&vm_ar(), "keep").await;
    // While the Machine lives: labelled ours, and no reference the garbage collector acts on.
    let dv = env.wait_for(&dv_ar(), "keep-root").await;
    assert!(owner_uids(&dv).is_empty(), "{dv}");
    assert_eq!(label(&dv, MACHINE_LABEL), Some("keep"));

    let policy = DeleteParams::foreground();
    env.delete(&machine_ar(), "keep", &policy).await;
    env.wait_gone(&machine_ar(), "keep").await;
    let kept = env
        .get(&dv_ar(), "keep-root")
        .await
        .expect("DataVolume kept");
    assert_eq!(uid(&kept), uid(&dv), "the same DataVolume");
    assert!(owner_uids(&kept).is_empty());
    // Installer media hold no data of the Machine's: its CD-ROM's DataVolume goes.
    env.wait_gone(&dv_ar(), "keep-iso").await;

    // A Machine of the same name adopts it.
    let again = env.machine("keep", spec).await;
    env.until("keep-root adopted", || async {
        let dv = env.get(&dv_ar(), "keep-root").await?;
        (controller_uid(&dv) == Some(uid(&again))).then_some(())
    })
    .await;
    let vm = env.wait_for(&vm_ar(), "keep").await;
    assert_eq!(mounted_claims(&vm), ["keep-root", "keep-iso"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_volume_the_operator_did_not_make_is_a_conflict() {
    let env = env("cdi-conflict").await;
    env.create(
        &dv_ar(),
        json!({"metadata": {"name": "c-root"}, "spec": {"source": {"http": {"url": IMAGE}},
               "storage": {"resources": {"requests": {"storage": "1Gi"}}}}}),
    )
    .await;
    env.machine(
        "c",
        json!({"template": "small", "disks": [{"name": "root", "size": "20Gi", "source": {"http": {"url": "https://other/image.qcow2"}}}]}),
    )
    .await;
    let message = env
        .wait_condition("c", "StorageReady", "False", "DataVolumeConflict")
        .await;
    assert!(message.contains("c-root"), "{message}");
    let dv = env.get(&dv_ar(), "c-root").await.expect("left alone");
    assert_eq!(
        dv.pointer("/spec/source/http/url"),
        Some(&json!(IMAGE)),
        "never modified"
    );
    assert!(
        env.get(&vm_ar(), "c").await.is_none(),
        "no VM mounts a volume another owns"
    );

    // Nor does deleting the Machine touch it.
    env.delete(&machine_ar(), "c", &DeleteParams::foreground())
        .await;
    env.wait_gone(&machine_ar(), "c").await;
    let after = env.get(&dv_ar(), "c-root").await.expect("still there");
    assert_eq!(uid(&after), uid(&dv));
}
