//! Playing KubeVirt's controllers through the real API server: the VMI a VM's controller makes,
//! with the status virt-handler writes.

#![allow(dead_code)] // Not every test binary uses every helper.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};

fn api(client: &Client, ns: &str, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, ar)
}

/// The VMI of Machine `name`, labelled as KubeVirt copies the VM template's labels and
/// controlled by the Machine's VM (only such a VMI feeds the status), with its whole `status`
/// replaced by `status`, as KubeVirt's controller writes it.
pub async fn vmi(client: &Client, ns: &str, name: &str, status: Value) {
    let vmis = api(
        client,
        ns,
        &ApiResource::erase::<VirtualMachineInstance>(&()),
    );
    if vmis.get_opt(name).await.expect("get VMI").is_none() {
        let vm = api(client, ns, &ApiResource::erase::<VirtualMachine>(&()))
            .get(name)
            .await
            .expect("the Machine's VM, which owns its VMI");
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "labels": {
                "vitistack.io/machine": name, "vitistack.io/managed-by": "kubevirt-operator"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                    "name": name, "uid": vm.metadata.uid, "controller": true,
                    "blockOwnerDeletion": true}]},
            "spec": {"domain": {"devices": {}}}
        }))
        .expect("VMI object");
        vmis.create(&PostParams::default(), &obj)
            .await
            .expect("create VMI");
    }
    let params = PatchParams::default();
    vmis.patch_status(name, &params, &Patch::Merge(json!({"status": null})))
        .await
        .expect("clear VMI status");
    vmis.patch_status(name, &params, &Patch::Merge(json!({ "status": status })))
        .await
        .expect("VMI status");
}
