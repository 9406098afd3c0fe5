//! Shared by the snapshot and restore e2e tests: a running Machine `web` with two blank disks,
//! a snapshot of it KubeVirt reports taken, and reading VMs and restores.

#![allow(dead_code)] // Not every test binary uses every helper.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::access::{WAIT, create_admitted, machines};
use crate::kubevirt;
use crate::support;
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::snapshots::{
    MachineRestore, MachineSnapshot, SCHEDULED_LABEL, SCHEDULED_PROOF_KIND,
};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::snapshot::VirtualMachineSnapshot;
use kubevirt_operator::reconciler::decide::evidence::Target;
use kubevirt_operator::reconciler::run::ownership_key;

pub mod restore;
pub mod trust;

pub const NS: &str = "team-a";

pub fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec
    }))
    .expect(kind)
}

pub fn dynamic<K: kube::Resource<DynamicType = ()>>(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &ApiResource::erase::<K>(&()))
}

pub async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    op: &support::Proc,
    f: impl FnMut() -> F,
) -> T {
    support::eventually_with(WAIT, what, || op.log_tail(60), f).await
}

pub fn claims_of(vm: &VirtualMachine) -> Vec<String> {
    vm.spec
        .template
        .spec
        .volumes
        .iter()
        .filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|p| p.claim_name.clone())
        })
        .collect()
}

pub fn uid(c: &PersistentVolumeClaim) -> String {
    c.uid().unwrap_or_default()
}

pub fn restore_phase(r: &MachineRestore) -> Option<&str> {
    r.status.as_ref()?.phase.as_deref()
}

/// Machine `web` (template small, a 1Gi data disk) with its VM on `web-root` and `web-data` and
/// a running VMI (playing KubeVirt); its VM and uid.
pub async fn running_web(admin: &Client, op: &support::Proc) -> (VirtualMachine, String) {
    let web = object(
        "Machine",
        "web",
        json!({"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}),
    );
    create_admitted(&machines(admin, NS), &web, op).await;
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let vm = eventually("web's VM on its disks", op, || async {
        let vm = vms.get_opt("web").await.ok().flatten()?;
        (claims_of(&vm) == ["web-root", "web-data"]).then_some(vm)
    })
    .await;
    assert_eq!(vm.spec.run_strategy.as_deref(), Some("Always"));
    kubevirt::vmi(admin, NS, "web", json!({"phase": "Running"})).await;
    let machine = Api::<Machine>::namespaced(admin.clone(), NS)
        .get("web")
        .await
        .expect("web");
    (vm, machine.uid().expect("uid"))
}

/// Plays KubeVirt's snapshot controller: the VirtualMachineSnapshot `name` taken, of `vm`.
pub async fn kubevirt_took(admin: &Client, name: &str, vm: &VirtualMachine) {
    Api::<VirtualMachineSnapshot>::namespaced(admin.clone(), NS)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "phase": "Succeeded", "readyToUse": true,
                "creationTime": "2026-11-25T02:00:03Z",
                "sourceUID": vm.uid(),
                "virtualMachineSnapshotContentName": format!("vmsnapshot-content-{name}"),
                "snapshotVolumes": {"includedVolumes": ["root", "data"]}}})),
        )
        .await
        .expect("VirtualMachineSnapshot status");
}

/// Plays KubeVirt's snapshot controller: the VirtualMachineSnapshot `name` failed, saying `why`.
pub async fn kubevirt_failed(admin: &Client, name: &str, why: &str) {
    Api::<VirtualMachineSnapshot>::namespaced(admin.clone(), NS)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed", "readyToUse": false,
                "error": {"message": why}}})),
        )
        .await
        .expect("KubeVirt's failure");
}

/// MachineSnapshot `name` of `web`, once KubeVirt took it and it is ready.
pub async fn snapshot_of_web(admin: &Client, op: &support::Proc, name: &str, vm: &VirtualMachine) {
    dynamic::<MachineSnapshot>(admin)
        .create(
            &PostParams::default(),
            &object("MachineSnapshot", name, json!({"machineName": "web"})),
        )
        .await
        .expect("MachineSnapshot");
    let vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(admin.clone(), NS);
    eventually("the VirtualMachineSnapshot", op, || async {
        vmsnaps.get_opt(name).await.ok().flatten()
    })
    .await;
    kubevirt_took(admin, name, vm).await;
    let msnaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), NS);
    eventually("the MachineSnapshot ready", op, || async {
        let s = msnaps.get(name).await.ok()?.status?;
        (s.ready_to_use == Some(true)).then_some(())
    })
    .await;
}

/// MachineSnapshot `name` of Machine `machine` (uid `machine_uid`) as the operator's schedule
/// makes it: labelled scheduled, with its made-for proof signed by the operator's own key (read
/// from its Secret by the admin, who plays the scheduler here).
pub async fn scheduled(
    admin: &Client,
    name: &str,
    machine: &str,
    machine_uid: &str,
) -> DynamicObject {
    let key = ownership_key::read(admin, crate::access::OP_NS)
        .await
        .expect("the operator's key")
        .expect("made by the operator");
    let target = Target {
        kind: SCHEDULED_PROOF_KIND,
        namespace: NS,
        name,
    };
    let mut o = object("MachineSnapshot", name, json!({"machineName": machine}));
    o.metadata.labels = Some([(SCHEDULED_LABEL.to_owned(), "true".to_owned())].into());
    let proof = key.proof(&target, machine, machine_uid);
    o.metadata.annotations = Some([(PROOF_ANNOTATION.to_owned(), proof)].into());
    o
}

/// The operator is still running (it never exited mid-test).
pub fn still_up(op: &mut support::Proc) {
    assert!(
        op.exited().is_none(),
        "the operator exited\n{}",
        op.log_tail(80)
    );
}
