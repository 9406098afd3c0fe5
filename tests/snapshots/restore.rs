//! Playing KubeVirt's restore controller and CDI for the restore e2e tests.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{NS, eventually, restore_phase};
use crate::support;
use kubevirt_operator::api::snapshots::MachineRestore;
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::snapshot::VirtualMachineRestore;

/// `restore` of Machine `web` from `snapshot`.
pub fn undo(name: &str, snapshot: &str) -> kube::api::DynamicObject {
    super::object(
        "MachineRestore",
        name,
        json!({"machineName": "web", "snapshotName": snapshot}),
    )
}

/// The MachineRestore `name` once in `phase`.
pub async fn in_phase(
    admin: &Client,
    op: &support::Proc,
    name: &str,
    phase: &str,
) -> MachineRestore {
    let mrestores: Api<MachineRestore> = Api::namespaced(admin.clone(), NS);
    eventually(&format!("{name} {phase}"), op, || async {
        let r = mrestores.get(name).await.ok()?;
        (restore_phase(&r) == Some(phase)).then_some(r)
    })
    .await
}

/// The VM halted for restore `name` (in `Stopping`, or past it already when no VMI ran), then
/// its VMI deleted (virt-controller).
pub async fn stopped_for(admin: &Client, op: &support::Proc, name: &str) {
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let mrestores: Api<MachineRestore> = Api::namespaced(admin.clone(), NS);
    eventually(&format!("the VM halted for {name}"), op, || async {
        let vm = vms.get("web").await.ok()?;
        let r = mrestores.get(name).await.ok()?;
        let phase = restore_phase(&r);
        (vm.spec.run_strategy.as_deref() == Some("Halted")
            && matches!(phase, Some("Stopping" | "Restoring")))
        .then_some(())
    })
    .await;
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(admin.clone(), NS);
    if vmis.get_opt("web").await.expect("VMI").is_some() {
        vmis.delete("web", &DeleteParams::default())
            .await
            .expect("VMI gone");
    }
}

/// A restored claim `name` of `volume`, from its VolumeSnapshot, as KubeVirt's restore controller
/// makes it: annotated with its VirtualMachineRestore's name, controlled by the VM, bound.
pub async fn restored_claim(admin: &Client, name: &str, volume: &str) {
    restored_claim_in(admin, name, volume, None).await;
}

/// [`restored_claim`] of storage class `class`: of [`WFFC`], not bound (no pod mounts it yet).
pub async fn restored_claim_in(admin: &Client, name: &str, volume: &str, class: Option<&str>) {
    let vm = Api::<VirtualMachine>::namespaced(admin.clone(), NS)
        .get("web")
        .await
        .expect("VM");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name,
            "labels": {"restore.kubevirt.io/source-vm-name": "web",
                       "restore.kubevirt.io/source-vm-namespace": NS},
            "annotations": {"restore.kubevirt.io/name": restore_of(admin, name).await},
            "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                "name": "web", "uid": vm.uid(), "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": "1Gi"}},
                 "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                "name": format!("vmsnapshot-web-before-{volume}")}}
    }))
    .expect("claim");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NS);
    pvcs.create(&PostParams::default(), &claim)
        .await
        .expect("restored claim");
    if class != Some(WFFC) {
        bind(&pvcs, name).await;
    }
}

/// The VirtualMachineRestore a restored claim `name` is made for: the MachineRestore whose uid
/// the asked-for name carries, or the one whose uid KubeVirt's own name carries.
async fn restore_of(admin: &Client, name: &str) -> String {
    let short = |uid: &str| {
        uid.chars()
            .filter(|c| *c != '-')
            .take(8)
            .collect::<String>()
    };
    let mrestores = Api::<MachineRestore>::namespaced(admin.clone(), NS);
    let vmrestores = Api::<VirtualMachineRestore>::namespaced(admin.clone(), NS);
    // A remote workload cluster serves no MachineRestores: there the only VirtualMachineRestore.
    let Ok(list) = mrestores.list(&Default::default()).await else {
        let list = vmrestores.list(&Default::default()).await.expect("list");
        assert_eq!(
            list.items.len(),
            1,
            "one VirtualMachineRestore on the remote cluster"
        );
        return list.items[0].name_any();
    };
    if let Some(r) =
        (list.items.iter()).find(|r| name.ends_with(&short(&r.uid().unwrap_or_default())))
    {
        return r.name_any();
    }
    let list = vmrestores.list(&Default::default()).await.expect("list");
    (list.items.iter())
        .find(|r| name.contains(&r.uid().unwrap_or_default()))
        .map(ResourceExt::name_any)
        .unwrap_or_default()
}

/// The storage binds claim `name` (the provisioner made its volume).
pub async fn bind(pvcs: &Api<PersistentVolumeClaim>, name: &str) {
    pvcs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await
    .expect("bound");
}

/// Storage class whose claims bind only once a pod mounts them (`WaitForFirstConsumer`).
pub const WFFC: &str = "zonal-wffc";

/// Plays the storage from now on: every claim in the namespace binds, at once (an `Immediate`
/// class) or, of class [`WFFC`], once a pod mounts it.
pub fn play_storage(admin: &Client) {
    let admin = admin.clone();
    tokio::spawn(async move {
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NS);
        let pods = Api::<Pod>::namespaced(admin.clone(), NS);
        loop {
            let (Ok(claims), Ok(pods)) = (
                pvcs.list(&Default::default()).await,
                pods.list(&Default::default()).await,
            ) else {
                break; // The control plane is gone: the test is over.
            };
            let consumed = |claim: &str| {
                (pods.items.iter()).any(|p| {
                    (p.spec.iter().flat_map(|s| s.volumes.iter().flatten())).any(|v| {
                        v.persistent_volume_claim
                            .as_ref()
                            .is_some_and(|c| c.claim_name == claim)
                    })
                })
            };
            for c in &claims.items {
                let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
                let class = c
                    .spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.as_deref());
                let name = c.name_any();
                if !bound
                    && c.metadata.deletion_timestamp.is_none()
                    && (class != Some(WFFC) || consumed(&name))
                {
                    let _ = pvcs
                        .patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
                        )
                        .await;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    });
}

/// KubeVirt's restore controller for the VirtualMachineRestore `name`: a claim per volume under
/// the name asked for (`volumeRestoreOverrides`), one under KubeVirt's own name for each of the
/// `unasked` volumes, and the VM's volumes pointed at them. Returns its VirtualMachineRestore
/// and (volume, claim), the asked ones first.
pub async fn kubevirt_restores(
    admin: &Client,
    op: &support::Proc,
    name: &str,
    unasked: &[&str],
) -> (VirtualMachineRestore, Vec<(String, String)>) {
    kubevirt_restores_in(admin, op, name, unasked, None).await
}

/// [`kubevirt_restores`] into claims of storage class `class`.
pub async fn kubevirt_restores_in(
    admin: &Client,
    op: &support::Proc,
    name: &str,
    unasked: &[&str],
    class: Option<&str>,
) -> (VirtualMachineRestore, Vec<(String, String)>) {
    play_storage(admin);
    let vmrestores: Api<VirtualMachineRestore> = Api::namespaced(admin.clone(), NS);
    let vmrestore = eventually(
        &format!("the VirtualMachineRestore of {name}"),
        op,
        || async { vmrestores.get_opt(name).await.ok().flatten() },
    )
    .await;
    let mut restored: Vec<(String, String)> = (vmrestore.spec.volume_restore_overrides.iter())
        .map(|o| {
            (
                o.volume_name.clone(),
                o.restore_name.clone().expect("a name"),
            )
        })
        .collect();
    let uid = vmrestore.uid().expect("uid");
    restored.extend(
        unasked
            .iter()
            .map(|v| ((*v).to_owned(), format!("restore-{uid}-{v}"))),
    );
    for (volume, claim) in &restored {
        restored_claim_in(admin, claim, volume, class).await;
    }
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let vm = vms.get("web").await.expect("VM");
    let volumes: Vec<Value> = (vm.spec.template.spec.volumes.iter())
        .map(
            |v| match restored.iter().find(|(name, _)| *name == v.name) {
                Some((_, claim)) => {
                    json!({"name": v.name, "persistentVolumeClaim": {"claimName": claim}})
                }
                None => serde_json::to_value(v).expect("volume"),
            },
        )
        .collect();
    vms.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"volumes": volumes}}}})),
    )
    .await
    .expect("VM on the restored claims");
    (vmrestore, restored)
}

/// KubeVirt reports the VirtualMachineRestore `name` complete.
pub async fn kubevirt_completes(admin: &Client, name: &str, restored: &[(String, String)]) {
    let restores: Vec<Value> = (restored.iter())
        .map(|(v, c)| {
            json!({"volumeName": v, "persistentVolumeClaim": c,
                   "volumeSnapshotName": format!("vmsnapshot-web-before-{v}")})
        })
        .collect();
    Api::<VirtualMachineRestore>::namespaced(admin.clone(), NS)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"complete": true, "restores": restores}})),
        )
        .await
        .expect("VirtualMachineRestore complete");
}

/// CDI's part once DataVolume `name` appears: the claim of its name it fills, controlled by it
/// and marked with its uid, bound, and the DataVolume `Succeeded`. Returns the DataVolume.
pub async fn cdi_fills(admin: &Client, op: &support::Proc, name: &str, size: &str) -> DataVolume {
    let dvs: Api<DataVolume> = Api::namespaced(admin.clone(), NS);
    let dv = eventually(&format!("the DataVolume {name}"), op, || async {
        dvs.get_opt(name).await.ok().flatten()
    })
    .await;
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name,
            "annotations": {"cdi.kubevirt.io/createdForDataVolume": dv.uid()},
            "ownerReferences": [{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                "name": name, "uid": dv.uid(), "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    }))
    .expect("CDI's claim");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    pvcs.create(&PostParams::default(), &claim)
        .await
        .expect("CDI's claim");
    let params = PatchParams::default();
    pvcs.patch_status(
        name,
        &params,
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await
    .expect("bound");
    dvs.patch_status(
        name,
        &params,
        &Patch::Merge(json!({"status": {"phase": "Succeeded", "progress": "100.0%"}})),
    )
    .await
    .expect("DataVolume status");
    dv
}
