//! Disks with sources restored, CD-ROMs left on their images.

use crate::access::{fixture, wait_status};
use crate::snapshots::restore::{
    cdi_fills, in_phase, kubevirt_completes, kubevirt_restores, stopped_for, undo,
};
use crate::snapshots::{
    NS, claims_of, dynamic, eventually, object, snapshot_of_web, still_up, uid,
};
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::snapshots::MachineRestore;
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::decide::held::mounted;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_with_a_source_is_restored_and_a_cdrom_left_on_its_image() {
    // The garbage collector takes CDI's old claim.
    let mut env = fixture(&[]).with_controller_manager().start().await;
    let (admin, mut op) = env.take_replica().await;
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let dvs: Api<DataVolume> = Api::namespaced(admin.clone(), NS);
    let web = object(
        "Machine",
        "web",
        json!({"template": "small",
               "disks": [{"name": "root", "size": "20Gi", "source": {"http": {"url": IMAGE}}},
                         {"name": "data", "size": "1Gi"}],
               "cdroms": [{"name": "iso", "source": {"http": {"url": ISO}}}]}),
    );
    let machine = access::create_admitted(&access::machines(&admin, NS), &web, &op).await;
    let machine_uid = machine.uid().expect("uid");
    // CDI imports both images.
    let old_root = cdi_fills(&admin, &op, "web-root", "20Gi").await;
    let old_iso = cdi_fills(&admin, &op, "web-iso", "1Gi").await;
    let vm = eventually("web's VM on its disks", &op, || async {
        let vm = vms.get_opt("web").await.ok().flatten()?;
        (mounted(&vm) == ["web-root", "web-data", "web-iso"]).then_some(vm)
    })
    .await;
    kubevirt::vmi(&admin, NS, "web", json!({"phase": "Running"})).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;
    let old_data = pvcs.get("web-data").await.expect("web-data");
    let old_cdi_root = pvcs.get("web-root").await.expect("CDI's web-root");

    dynamic::<MachineRestore>(&admin)
        .create(&PostParams::default(), &undo("undo", "web-before"))
        .await
        .expect("undo");
    stopped_for(&admin, &op, "undo").await;
    // The CD-ROM is in the snapshot too: KubeVirt restores it under its own name.
    let (_, restored) = kubevirt_restores(&admin, &op, "undo", &["iso"]).await;
    let names: Vec<&str> = restored.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(names, ["data", "root", "iso"], "no override for the CD-ROM");
    let restored_root = restored[1].1.clone();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let held = vms.get("web").await.expect("VM");
    let mut on_restored: Vec<String> = restored.iter().map(|(_, c)| c.clone()).collect();
    let mut mounts = claims_of(&held);
    on_restored.sort();
    mounts.sort();
    assert_eq!(mounts, on_restored, "reverted mid-restore");
    kubevirt_completes(&admin, "undo", &restored).await;

    // The DataVolume is made again as a clone of its restored claim, after the old one and
    // CDI's claim of it are gone; CDI (the test) fills it.
    let new_root = eventually("web-root made again", &op, || async {
        let dv = dvs.get_opt("web-root").await.ok().flatten()?;
        (dv.uid() != old_root.uid()).then_some(dv)
    })
    .await;
    let pvc = new_root.spec.source.as_ref().and_then(|s| s.pvc.as_ref());
    assert_eq!(
        pvc.map(|p| (p.namespace.as_str(), p.name.as_str())),
        Some((NS, restored_root.as_str())),
        "a clone of the restored claim"
    );
    assert_eq!(
        (new_root.spec.storage.as_ref()).and_then(|s| s
            .resources
            .as_ref()?
            .requests
            .get("storage")
            .cloned()),
        Some("20Gi".to_owned()),
        "the size of the disk it replaces"
    );
    let owner = &new_root.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        (machine_uid.as_str(), Some(true))
    );
    assert!(new_root.annotations().contains_key(PROOF_ANNOTATION));
    assert_eq!(
        (new_root.labels().get("vitistack.io/machine")).map(String::as_str),
        Some("web")
    );
    assert!(
        pvcs.get_opt("web-root").await.expect("claim").is_none(),
        "CDI's old claim went with its DataVolume"
    );
    cdi_fills(&admin, &op, "web-root", "20Gi").await;
    in_phase(&admin, &op, "undo", "Succeeded").await;
    let vm = vms.get("web").await.expect("VM");
    assert_eq!(mounted(&vm), ["web-root", "web-data", "web-iso"]);
    assert_eq!(
        vm.spec.run_strategy.as_deref(),
        Some("Always"),
        "started again"
    );
    let data = pvcs.get("web-data").await.expect("web-data");
    assert_ne!(uid(&data), uid(&old_data));
    let from = data.spec.as_ref().and_then(|s| s.data_source.as_ref());
    assert_eq!(from.map(|f| f.name.as_str()), Some(restored[0].1.as_str()));
    let cdi_root = pvcs.get("web-root").await.expect("CDI's new web-root");
    assert_ne!(uid(&cdi_root), uid(&old_cdi_root));
    // The CD-ROM: its DataVolume untouched; KubeVirt's copy of it neither adopted nor mounted.
    let iso = dvs.get("web-iso").await.expect("web-iso");
    assert_eq!(iso.uid(), old_iso.uid());
    assert!(pvcs.get_opt(&restored[2].1).await.expect("claim").is_some());

    // Several resyncs later the reconciler keeps the clone as it is: not made again (it would
    // import the image over the restored data), no conflict.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let still = dvs.get("web-root").await.expect("web-root");
    assert_eq!(still.uid(), new_root.uid());
    assert_eq!(still.spec.source, new_root.spec.source);
    let status = wait_status(&admin, NS, "web", &op, "the storage reported", |s| {
        s.conditions.iter().any(|c| c.type_ == "StorageReady")
    })
    .await;
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.reason.contains("Conflict")),
        "{:?}",
        status.conditions
    );
    still_up(&mut op);
}
