//! Helpers of tests/reconciler_ownership.rs: one namespace of a control plane where the operator
//! runs, read and written as raw JSON (the tests assert on the API's objects, not on the
//! library's types, so they hold across the reconciler's reshaping).

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams, PropagationPolicy,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::support::{Fixture, Started, eventually_with, log_tail};

pub const WAIT: Duration = Duration::from_secs(45);
pub const MANAGED_BY_LABEL: &str = "vitistack.io/managed-by";
pub const MANAGED_BY: &str = "kubevirt-operator";
pub const MACHINE_LABEL: &str = "vitistack.io/machine";
pub const RETAIN_DISKS: &str = "vitistack.io/retain-disks";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn machine_ar() -> ApiResource {
    resource("vitistack.io", "v1alpha1", "Machine", "machines")
}
pub fn network_configuration_ar() -> ApiResource {
    resource(
        "vitistack.io",
        "v1alpha1",
        "NetworkConfiguration",
        "networkconfigurations",
    )
}
pub fn vm_ar() -> ApiResource {
    resource("kubevirt.io", "v1", "VirtualMachine", "virtualmachines")
}
pub fn vmi_ar() -> ApiResource {
    resource(
        "kubevirt.io",
        "v1",
        "VirtualMachineInstance",
        "virtualmachineinstances",
    )
}
pub fn nad_ar() -> ApiResource {
    resource(
        "k8s.cni.cncf.io",
        "v1",
        "NetworkAttachmentDefinition",
        "network-attachment-definitions",
    )
}
pub fn pvc_ar() -> ApiResource {
    ApiResource::erase::<PersistentVolumeClaim>(&())
}

/// `(status, reason, message)` of condition `type_` in a Machine's JSON.
pub fn condition(machine: &Value, type_: &str) -> Option<(String, String, String)> {
    let found = machine
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let text = |k: &str| found[k].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason"), text("message")))
}

/// The uid of the controller owner reference, if any.
pub fn controller_uid(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)
        .and_then(|o| o["uid"].as_str())
        .map(str::to_owned)
}

pub fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|o| o["uid"].as_str().map(str::to_owned))
        .collect()
}

pub fn uid(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .expect("metadata.uid")
        .to_owned()
}

pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/labels")?.get(key)?.as_str()
}

/// Every claim a VM's template mounts (PVC volumes and DataVolume volumes).
pub fn mounted_claims(vm: &Value) -> Vec<String> {
    vm.pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.pointer("/persistentVolumeClaim/claimName")
                .or_else(|| v.pointer("/dataVolume/name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect()
}

/// One namespace, an admin client, and the operator log for failure messages.
pub struct Env {
    pub client: Client,
    pub ns: String,
    pub operator_log: PathBuf,
}

/// A new namespace on the test binary's shared control plane (with the garbage collector),
/// where one operator named `identity` serves every test.
pub async fn shared_env(identity: &str, prefix: &str) -> Env {
    let started = Fixture::new()
        .with_all_crds()
        .with_controller_manager()
        .operator(identity, &[])
        .shared()
        .await;
    Env::on(started, prefix).await
}

impl Env {
    /// A new namespace named after `prefix` on `started`'s control plane, where its operator
    /// runs.
    pub async fn on(started: &Started, prefix: &str) -> Env {
        Env {
            client: started.admin_client().await,
            ns: started.namespace(prefix).await.expect("namespace"),
            operator_log: started.operator().proc.log.clone(),
        }
    }

    pub fn log(&self) -> String {
        log_tail(&self.operator_log, 80)
    }

    pub fn api(&self, ar: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, ar)
    }

    /// Polls `check` for up to [`WAIT`], with the operator's log in the failure message.
    pub async fn until<T, F, Fut>(&self, what: &str, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        eventually_with(
            WAIT,
            &format!("{what} (in {})", self.ns),
            || self.log(),
            check,
        )
        .await
    }

    pub async fn create(&self, ar: &ApiResource, mut object: Value) -> Value {
        object["apiVersion"] = ar.api_version.clone().into();
        object["kind"] = ar.kind.clone().into();
        let obj: DynamicObject = serde_json::from_value(object).expect("object");
        let made = self
            .api(ar)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {} {}: {e}", ar.kind, obj.name_any()));
        serde_json::to_value(made).expect("json")
    }

    pub async fn get(&self, ar: &ApiResource, name: &str) -> Option<Value> {
        let found = self
            .api(ar)
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("get {} {name}: {e}", ar.kind));
        found.map(|o| serde_json::to_value(o).expect("json"))
    }

    pub async fn wait_for(&self, ar: &ApiResource, name: &str) -> Value {
        self.until(&format!("{} {name}", ar.kind), || self.get(ar, name))
            .await
    }

    pub async fn wait_gone(&self, ar: &ApiResource, name: &str) {
        self.until(&format!("{} {name} to go", ar.kind), || async {
            self.get(ar, name).await.is_none().then_some(())
        })
        .await;
    }

    pub async fn delete(&self, ar: &ApiResource, name: &str, params: &DeleteParams) {
        self.api(ar)
            .delete(name, params)
            .await
            .unwrap_or_else(|e| panic!("delete {} {name}: {e}", ar.kind));
    }

    /// A Machine exactly as given (no webhook runs in these tests).
    pub async fn machine(&self, name: &str, spec: Value) -> Value {
        self.create(
            &machine_ar(),
            json!({"metadata": {"name": name}, "spec": spec}),
        )
        .await
    }

    pub async fn network_configuration(&self, name: &str, bridge: &str, vlan: i64) {
        self.create(
            &network_configuration_ar(),
            json!({"metadata": {"name": name}, "spec": {"bridge": bridge, "vlan": vlan}}),
        )
        .await;
    }

    /// Waits until the Machine's condition `type_` has `status` and `reason`; returns its message.
    pub async fn wait_condition(
        &self,
        machine: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> String {
        let what = format!("Machine {machine}: {type_}={status} reason {reason}");
        self.until(&what, || async {
            let m = self.get(&machine_ar(), machine).await?;
            let (s, r, message) = condition(&m, type_)?;
            (s == status && r == reason).then_some(message)
        })
        .await
    }

    pub async fn wait_phase(&self, machine: &str, phase: &str) -> Value {
        self.until(&format!("Machine {machine} phase {phase}"), || async {
            let m = self.get(&machine_ar(), machine).await?;
            (m.pointer("/status/phase") == Some(&json!(phase))).then_some(m)
        })
        .await
    }

    /// Events (events.k8s.io/v1) about `machine`, as (type, reason, note).
    pub async fn events(&self, machine: &str) -> Vec<(String, String, String)> {
        crate::support::events_about(&self.client, &self.ns, machine).await
    }

    /// Waits for an Event with `reason` on `machine`; returns (type, note).
    pub async fn wait_event(&self, machine: &str, reason: &str) -> (String, String) {
        self.until(&format!("Event {reason} on {machine}"), || async {
            self.events(machine)
                .await
                .into_iter()
                .find(|(_, r, _)| r == reason)
                .map(|(t, _, note)| (t, note))
        })
        .await
    }

    /// A VirtualMachineInstance as KubeVirt would write it, with `owner` (a VM's JSON) as its
    /// controller when given, labelled for `machine`, with `status`.
    pub async fn vmi(&self, name: &str, machine: &str, owner: Option<&Value>, status: Value) {
        let mut metadata = json!({"name": name, "labels": {
            MACHINE_LABEL: machine, MANAGED_BY_LABEL: MANAGED_BY}});
        if let Some(vm) = owner {
            metadata["ownerReferences"] = json!([{
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                "name": vm["metadata"]["name"], "uid": vm["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true}]);
        }
        self.create(
            &vmi_ar(),
            json!({"metadata": metadata, "spec": {"domain": {"devices": {}}}}),
        )
        .await;
        let api = self.api(&vmi_ar());
        api.patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "status": status })),
        )
        .await
        .expect("VMI status");
    }
}

/// Holds for `period`: `check` is true at every look (every 200 ms).
pub async fn stays(env: &Env, what: &str, period: Duration, check: impl AsyncFn() -> bool) {
    let deadline = std::time::Instant::now() + period;
    while std::time::Instant::now() < deadline {
        assert!(check().await, "{what} (in {})\n{}", env.ns, env.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn delete_with(policy: PropagationPolicy) -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(policy),
        ..DeleteParams::default()
    }
}
