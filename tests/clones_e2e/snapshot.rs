//! The clone from a MachineSnapshot (see the test binary's documentation).

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::access::{WAIT, machine_object, machines};
use crate::support::{self, Proc};
use crate::{NS, ROOT_COPY, create, data_volume, str_at};
use kubevirt_operator::api::MachineSnapshot;
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::snapshot::{
    VirtualMachineSnapshot, VirtualMachineSnapshotContent,
};

/// A clone from a MachineSnapshot of web: each disk a CDI clone of its VolumeSnapshot there
/// (KubeVirt's content played: the snapshot controller and CSI are not here).
pub async fn from_a_snapshot(env: &support::Started, admin: &Client, op: &Proc) {
    let snaps = Api::<MachineSnapshot>::namespaced(admin.clone(), NS);
    let snap: MachineSnapshot = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": "web-snap"}, "spec": {"machineName": "web"}}))
    .expect("snapshot");
    snaps
        .create(&PostParams::default(), &snap)
        .await
        .expect("MachineSnapshot");
    let vm_snaps = Api::<VirtualMachineSnapshot>::namespaced(admin.clone(), NS);
    support::eventually_with(
        WAIT,
        "the VirtualMachineSnapshot web-snap",
        || op.log_tail(40),
        || async { vm_snaps.get_opt("web-snap").await.ok().flatten() },
    )
    .await;
    let content: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshotContent",
        "metadata": {"name": "vmsnapshot-content-web-snap"},
        "spec": {"source": {"virtualMachine": {"metadata": {"name": "web"}, "spec": {"template": {}}}},
                 "virtualMachineSnapshotName": "web-snap",
                 "volumeBackups": [{"volumeName": "root", "volumeSnapshotName": ROOT_COPY,
                     "persistentVolumeClaim": {"metadata": {"name": "web-root"}, "spec": {}}}]}}))
    .expect("content");
    let contents: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::erase::<VirtualMachineSnapshotContent>(&()),
    );
    contents
        .create(&PostParams::default(), &content)
        .await
        .expect("KubeVirt's content (its real CRD)");
    vm_snaps
        .patch_status(
            "web-snap",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded", "readyToUse": true,
                "creationTime": "2026-11-28T02:00:03Z",
                "virtualMachineSnapshotContentName": "vmsnapshot-content-web-snap",
                "snapshotVolumes": {"includedVolumes": ["root"]}}})),
        )
        .await
        .expect("KubeVirt took it");
    support::eventually_with(
        WAIT,
        "web-snap ready",
        || op.log_tail(40),
        || async {
            let s = snaps.get("web-snap").await.ok()?.status?;
            (s.ready_to_use == Some(true)).then_some(())
        },
    )
    .await;

    let web = machines(admin, NS).get("web").await.expect("web");
    let web_mac = str_at(&web, "/spec/networks/0/macAddress").map(str::to_owned);
    let from_snap = || json!({"cloneFrom": {"snapshot": "web-snap"}, "runStrategy": "Halted"});
    let dora = machines(&env.client_of("dora").await, NS);
    let copy = create(&dora, &machine_object("web-7", from_snap()), op)
        .await
        .expect("dora may clone web-snap");
    assert_eq!(
        copy.data.pointer("/spec/disks/0/source"),
        Some(&json!({"snapshot": {"name": ROOT_COPY}})),
        "{:?}",
        copy.data
    );
    assert_eq!(str_at(&copy, "/spec/cloneFrom/snapshot"), Some("web-snap"));
    let mac = str_at(&copy, "/spec/networks/0/macAddress").map(str::to_owned);
    assert!(mac.is_some() && mac != web_mac, "{mac:?} {web_mac:?}");
    let dv = data_volume(admin, "web-7-root", op).await;
    let source = dv.spec.source.as_ref().and_then(|s| s.snapshot.as_ref());
    assert_eq!(
        source.map(|v| (v.namespace.as_str(), v.name.as_str())),
        Some((NS, ROOT_COPY)),
        "a CDI snapshot clone, accepted by CDI's CRD"
    );

    // amy may not read snapshots; cara may, but not clone the VolumeSnapshot.
    let amy = machines(&env.client_of("amy").await, NS);
    let (code, said) = create(&amy, &machine_object("web-8", from_snap()), op)
        .await
        .expect_err("amy may not get web-snap");
    assert_eq!(code, 403, "{said}");
    assert!(
        said.contains(
            r#"user "amy" cannot get machinesnapshots.vitistack.io in namespace "team-a""#
        ),
        "{said}"
    );
    let cara = machines(&env.client_of("cara").await, NS);
    let (code, said) = create(&cara, &machine_object("web-9", from_snap()), op)
        .await
        .expect_err("cara may not clone the VolumeSnapshot");
    assert_eq!(code, 403, "{said}");
    assert!(
        said.contains(&format!(
            r#"user "cara" cannot create datavolumes/source.cdi.kubevirt.io "{ROOT_COPY}" in namespace "team-a""#
        )),
        "{said}"
    );
    let dvs: Api<DataVolume> = Api::namespaced(admin.clone(), NS);
    for refused in ["web-8-root", "web-9-root"] {
        assert!(
            dvs.get_opt(refused).await.expect("get").is_none(),
            "{refused}"
        );
    }
}
