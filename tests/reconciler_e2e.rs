//! The reconciler end to end: the `kubevirt-operator run` binary against kube-apiserver v1.20
//! with KubeVirt's and Multus' real CRDs, as a user holding exactly `manifests/rbac/` (so every
//! test here also proves that RBAC sufficient). The tests play KubeVirt (VMIs and their status)
//! and the volume controller (PVC phases); no webhook is registered, so every Machine is stored
//! as written, the way a Machine that bypassed admission would be.
//!
//! One operator serves the whole file (it watches every namespace); each test works in its own
//! namespace.

mod kubevirt;
mod operator;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use kubevirt_operator::api::{Machine, MachineStatus, NetworkConfiguration};
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use operator::eventually;
use support::{Fixture, Started};

const WAIT: Duration = Duration::from_secs(30);

struct Env {
    client: Client,
    ns: String,
}

/// The one control plane and operator of this file's tests.
async fn shared() -> &'static Started {
    Fixture::new()
        .with_all_crds()
        .operator("e2e", &[])
        .shared()
        .await
}

async fn env(prefix: &str) -> Env {
    let started = shared().await;
    Env {
        client: started.admin_client().await,
        ns: started.namespace(prefix).await.expect("namespace"),
    }
}

fn operator_log() -> String {
    support::shared_started()
        .map(|s| s.operator().log_tail())
        .unwrap_or_default()
}

fn condition(s: &MachineStatus, type_: &str) -> (String, String) {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_default()
}

fn cond(status: &str, reason: &str) -> (String, String) {
    (status.to_owned(), reason.to_owned())
}

impl Env {
    fn machines(&self) -> Api<Machine> {
        Api::namespaced(self.client.clone(), &self.ns)
    }
    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }
    fn dynamic(&self, ar: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, ar)
    }

    /// Creates a Machine exactly as given (no webhook runs here).
    async fn create_machine(&self, name: &str, spec: Value) {
        self.create_machine_with(json!({"metadata": {"name": name}, "spec": spec}))
            .await;
    }

    async fn create_machine_with(&self, mut object: Value) {
        object["apiVersion"] = "vitistack.io/v1alpha1".into();
        object["kind"] = "Machine".into();
        let obj: DynamicObject = serde_json::from_value(object).expect("machine object");
        self.dynamic(&ApiResource::erase::<Machine>(&()))
            .create(&PostParams::default(), &obj)
            .await
            .expect("create Machine");
    }

    async fn status(&self, name: &str) -> Option<MachineStatus> {
        self.machines().get_opt(name).await.ok().flatten()?.status
    }

    async fn wait_status(
        &self,
        name: &str,
        what: &str,
        pred: impl Fn(&MachineStatus) -> bool,
    ) -> MachineStatus {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let s = self.status(name).await;
            if let Some(s) = s.as_ref().filter(|s| pred(s)) {
                return s.clone();
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "Machine {}/{name}: timed out waiting for {what}; status: {}\noperator log:\n{}",
                    self.ns,
                    serde_json::to_string_pretty(&s).unwrap_or_default(),
                    operator_log()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn vm(&self, name: &str) -> Option<VirtualMachine> {
        self.api::<VirtualMachine>()
            .get_opt(name)
            .await
            .expect("get VM")
    }

    async fn wait_vm(&self, name: &str) -> VirtualMachine {
        let api = self.api::<VirtualMachine>();
        eventually(WAIT, &format!("VirtualMachine {name}"), || {
            let api = api.clone();
            async move { api.get_opt(name).await.ok().flatten() }
        })
        .await
    }

    async fn pvc_names(&self) -> Vec<String> {
        self.api::<PersistentVolumeClaim>()
            .list(&ListParams::default())
            .await
            .expect("list PVCs")
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect()
    }

    /// Plays the volume controller.
    async fn bind_pvc(&self, name: &str) {
        self.api::<PersistentVolumeClaim>()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Bound"}})),
            )
            .await
            .expect("bind PVC");
    }

    fn vmis(&self) -> Api<DynamicObject> {
        self.dynamic(&ApiResource::erase::<VirtualMachineInstance>(&()))
    }

    /// Plays KubeVirt: the Machine's VMI with `status` (see `kubevirt::vmi`).
    async fn vmi(&self, name: &str, status: Value) {
        kubevirt::vmi(&self.client, &self.ns, name, status).await;
    }

    async fn delete_vmi(&self, name: &str) {
        self.vmis()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete VMI");
    }

    async fn network_configuration(&self, name: &str, bridge: &str, vlan: i64) {
        let obj: NetworkConfiguration = serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration",
            "metadata": {"name": name}, "spec": {"bridge": bridge, "vlan": vlan}
        }))
        .expect("NC");
        self.api::<NetworkConfiguration>()
            .create(&PostParams::default(), &obj)
            .await
            .expect("create NetworkConfiguration");
    }

    /// Events (events.k8s.io/v1) about `machine`, as (type, reason, note).
    async fn events(&self, machine: &str) -> Vec<(String, String, String)> {
        support::events_about(&self.client, &self.ns, machine).await
    }

    async fn wait_event(&self, machine: &str, reason: &str) -> String {
        eventually(WAIT, &format!("Event {reason} on {machine}"), || async {
            self.events(machine)
                .await
                .into_iter()
                .find(|(_, r, _)| r == reason)
                .map(|(_, _, note)| note)
        })
        .await
    }

    async fn gone<K>(&self, name: &str) -> bool
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        self.api::<K>().get_opt(name).await.expect("get").is_none()
    }
}

async fn storage_class(client: &Client, name: &str) {
    let sc: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": "example.com/none"
    }))
    .expect("SC");
    match Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &sc)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create StorageClass: {e}"),
    }
}

// ---------------------------------------------------------------------------------------------

/// resourceVersions of everything the operator keeps for the namespace.
async fn versions(env: &Env) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (kind, ar) in [
        ("Machine", ApiResource::erase::<Machine>(&())),
        ("VirtualMachine", ApiResource::erase::<VirtualMachine>(&())),
        (
            "PersistentVolumeClaim",
            ApiResource::erase::<PersistentVolumeClaim>(&()),
        ),
        (
            "NetworkAttachmentDefinition",
            ApiResource::erase::<NetworkAttachmentDefinition>(&()),
        ),
    ] {
        for o in env
            .dynamic(&ar)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
        {
            out.insert(
                format!("{kind}/{}", o.name_any()),
                o.resource_version().unwrap_or_default(),
            );
        }
    }
    out
}

/// The tests, by subject, in tests/reconciler_e2e/ (still one test binary).
mod reconciler_e2e {
    mod deletion;
    mod golden;
    mod inputs;
    mod writes;
}
