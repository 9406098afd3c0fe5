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
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use kubevirt_operator::api::{Machine, MachineStatus, NetworkConfiguration};
use kubevirt_operator::machine::network_policy::{NetworkPolicy, Vlans};
use kubevirt_operator::machine::{Catalog, FINALIZER, resolve};
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use kubevirt_operator::reconciler::decide::desired::{self, Inputs, SecretData};
use operator::{OPERATOR_USER, RESYNC, eventually};
use support::{ControlPlane, Fixture, Started};

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
// Golden files: the seed's four examples.

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reconciler")
}

/// Replaces what differs between runs (uids, versions, times, namespace) by placeholders.
fn normalize(mut v: Value, ns: &str) -> Value {
    let meta = v["metadata"].as_object_mut().expect("metadata");
    for k in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "generation",
        "selfLink",
    ] {
        meta.remove(k);
    }
    meta.insert("namespace".into(), "NAMESPACE".into());
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut)
        && a.contains_key("vitistack.io/applied-hash")
    {
        a.insert("vitistack.io/applied-hash".into(), "HASH".into());
    }
    // The made-for proof names the Machine's uid, then an HMAC under the operator's key: kept
    // as MACHINE_UID.PROOF when its uid is the controller owner's (anything else shows raw).
    let controller = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .and_then(|o| o.iter().find(|o| o["controller"] == true))
        .and_then(|o| o["uid"].as_str())
        .map(str::to_owned);
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut)
        && let Some(proof) = a.get("vitistack.io/made-for").and_then(Value::as_str)
        && let Some((uid, tag)) = proof.split_once('.')
        && Some(uid) == controller.as_deref()
        && tag.len() == 43
    {
        a.insert("vitistack.io/made-for".into(), "MACHINE_UID.PROOF".into());
    }
    if let Some(owners) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        for o in owners {
            let kind = o["kind"].as_str().unwrap_or_default().to_uppercase();
            o["uid"] = format!("{kind}_UID").into();
        }
    }
    if let Some(obj) = v.as_object_mut() {
        obj.remove("status");
    }
    let text = v.to_string().replace(ns, "NAMESPACE");
    serde_json::from_str(&text).expect("json")
}

async fn raw(env: &Env, ar: &ApiResource, name: &str) -> Value {
    let obj = env.dynamic(ar).get(name).await.expect("get object");
    serde_json::to_value(obj).expect("json")
}

fn compare_golden(name: &str, docs: &[Value]) {
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}", serde_yaml::to_string(d).expect("yaml")))
        .collect();
    let path = golden_dir().join(format!("{name}.yaml"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, &text).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(
        text,
        want,
        "{} differs from what the operator wrote (UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

/// What the reconciler derives for `machine`, computed here with the library's pure core.
fn derived(machine: &Machine, ncs: &BTreeMap<String, NetworkConfiguration>) -> desired::Desired {
    let spec = resolve(&machine.spec, None, &Catalog::default()).spec;
    let scs = spec
        .disks
        .iter()
        .filter_map(|d| d.storage_class.clone())
        .collect();
    desired::derive(&Inputs {
        machine,
        spec: &spec,
        network_configurations: ncs,
        storage_classes: &scs,
        cloud_init_secret: None::<SecretData>,
        network_policy: &NetworkPolicy::new(
            ["br0", "br-prod", "br-storage"].map(str::to_owned),
            Vlans::parse("0-4094").expect("vlans"),
        ),
        eviction_strategy: kubevirt_operator::api::placement::DEFAULT_EVICTION_STRATEGY,
        label_prefixes: &[],
        copy_user_data: false,
    })
}

async fn golden_example(file: &str, golden: &str) {
    let env = env(&format!("golden-{golden}")).await;
    storage_class(&env.client, "fast-ssd").await;
    env.network_configuration("prod-network", "br-prod", 100)
        .await;
    env.network_configuration("storage-network", "br-storage", 0)
        .await;
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(file),
    )
    .expect("example");
    let mut machine: Value = serde_yaml::from_str(&text).expect("example YAML");
    machine["metadata"]["namespace"] = env.ns.clone().into();
    let name = machine["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    env.create_machine_with(machine).await;

    env.wait_status(&name, "phase Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
    let stored = env.machines().get(&name).await.expect("machine");
    let ncs: BTreeMap<String, NetworkConfiguration> = env
        .api::<NetworkConfiguration>()
        .list(&ListParams::default())
        .await
        .expect("NCs")
        .items
        .into_iter()
        .map(|n| (n.name_any(), n))
        .collect();
    let want = derived(&stored, &ncs);

    // Accepted by KubeVirt's schema as written: nothing pruned, nothing added.
    let vm = raw(&env, &ApiResource::erase::<VirtualMachine>(&()), &name).await;
    let want_vm = serde_json::to_value(want.vm.as_ref().expect("VM derived")).expect("json");
    assert_eq!(
        vm["spec"], want_vm["spec"],
        "the API server stored the VM spec as sent"
    );

    let mut docs = vec![normalize(vm, &env.ns)];
    let pvc_ar = ApiResource::erase::<PersistentVolumeClaim>(&());
    for pvc in &want.pvcs {
        docs.push(normalize(
            raw(&env, &pvc_ar, &pvc.name_any()).await,
            &env.ns,
        ));
    }
    let nad_ar = ApiResource::erase::<NetworkAttachmentDefinition>(&());
    for nad in &want.attachments {
        docs.push(normalize(
            raw(&env, &nad_ar, &nad.name_any()).await,
            &env.ns,
        ));
    }
    assert_eq!(
        env.pvc_names().await.len(),
        want.pvcs.len(),
        "one claim per resolved disk"
    );
    compare_golden(golden, &docs);
}

#[tokio::test]
async fn golden_basic() {
    golden_example("basic.yaml", "basic").await;
}

#[tokio::test]
async fn golden_overrides() {
    golden_example("overrides.yaml", "overrides").await;
}

#[tokio::test]
async fn golden_networking() {
    golden_example("networking.yaml", "networking").await;
}

#[tokio::test]
async fn golden_cloud_init() {
    golden_example("cloud-init.yaml", "cloud-init").await;
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

#[tokio::test]
async fn converged_machines_cause_no_writes() {
    let env = env("converged").await;
    env.network_configuration("lan", "br0", 7).await;
    env.create_machine("plain", json!({"template": "small"}))
        .await;
    env.create_machine(
        "wired",
        json!({"networks": [{"name": "eth0", "networkName": "lan"}], "cloudInit": {"userData": "#cloud-config\n"}}),
    )
    .await;
    for m in ["plain", "wired"] {
        env.wait_status(m, "Creating", |s| s.phase.as_deref() == Some("Creating"))
            .await;
    }
    // Let the writes the first reconciles caused come back as events and settle.
    tokio::time::sleep(RESYNC * 2).await;
    let before = versions(&env).await;
    assert_eq!(before.len(), 2 + 2 + 2 + 1, "{before:?}");
    tokio::time::sleep(RESYNC * 4).await;
    assert_eq!(
        versions(&env).await,
        before,
        "resyncs of converged Machines wrote something"
    );
}

/// The operator's writes to Machines in this namespace, as (name, subresource, verb).
fn machine_writes(cp: &ControlPlane, ns: &str) -> Vec<(String, String, String)> {
    cp.audited_requests()
        .expect("audit log")
        .into_iter()
        .filter(|r| {
            r.user == OPERATOR_USER
                && r.resource == "machines"
                && r.namespace == ns
                && matches!(r.verb.as_str(), "patch" | "update")
        })
        .map(|r| (r.name, r.subresource, r.verb))
        .collect()
}

#[tokio::test]
async fn the_finalizer_is_written_only_when_missing() {
    let env = env("finalizer-writes").await;
    let cp = shared().await;
    // As the mutating webhook stores a new Machine, and as one stored before it was installed.
    env.create_machine_with(
        json!({"metadata": {"name": "admitted", "finalizers": [FINALIZER]},
                                   "spec": {"template": "small"}}),
    )
    .await;
    env.create_machine("legacy", json!({"template": "small"}))
        .await;
    for m in ["admitted", "legacy"] {
        env.wait_status(m, "a status naming its VM", |s| s.vm_name.is_some())
            .await;
        let machine = env.machines().get(m).await.expect("get");
        assert_eq!(machine.finalizers(), [FINALIZER], "{m}");
    }
    // The audit log is written as requests complete; the status writes come last.
    let writes = eventually(WAIT, "both status writes in the audit log", || async {
        let w = machine_writes(cp, &env.ns);
        ["admitted", "legacy"]
            .iter()
            .all(|m| w.iter().any(|(n, sub, _)| n == m && sub == "status"))
            .then_some(w)
    })
    .await;
    let main_resource = |m: &str| {
        writes
            .iter()
            .filter(|(n, sub, _)| n == m && sub.is_empty())
            .count()
    };
    assert_eq!(main_resource("admitted"), 0, "{writes:?}");
    assert_eq!(main_resource("legacy"), 1, "{writes:?}");
}

#[tokio::test]
async fn status_follows_the_vmi() {
    let env = env("status-walk").await;
    env.create_machine("walk", json!({"template": "small"}))
        .await;
    env.wait_vm("walk").await;
    let s = env
        .wait_status("walk", "Creating", |s| {
            s.phase.as_deref() == Some("Creating")
        })
        .await;
    assert_eq!(condition(&s, "StorageReady"), cond("False", "PVCPending"));
    assert_eq!(
        condition(&s, "VirtualMachineReady"),
        cond("True", "VMCreated")
    );
    assert_eq!(s.vm_name.as_deref(), Some("walk"));
    assert_eq!(s.observed_generation, Some(1));
    env.wait_event("walk", "VMCreated").await;

    env.bind_pvc("walk-root").await;
    let s = env
        .wait_status("walk", "storage bound", |s| {
            condition(s, "StorageReady").0 == "True"
        })
        .await;
    assert_eq!(condition(&s, "StorageReady"), cond("True", "PVCBound"));
    let bound_at = s
        .conditions
        .iter()
        .find(|c| c.type_ == "StorageReady")
        .map(|c| c.last_transition_time.clone());

    env.vmi("walk", json!({"phase": "Scheduling"})).await;
    let s = env
        .wait_status("walk", "the VMI", |s| s.vmi_name.is_some())
        .await;
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    assert_eq!(condition(&s, "Ready"), cond("False", "Creating"));

    env.vmi(
        "walk",
        json!({"phase": "Scheduling", "conditions": [{"type": "PodScheduled", "status": "False",
               "reason": "Unschedulable", "message": "0/3 nodes are available: 3 Insufficient memory."}]}),
    )
    .await;
    let s = env
        .wait_status("walk", "InsufficientResources", |s| {
            condition(s, "VirtualMachineReady").1 == "InsufficientResources"
        })
        .await;
    assert_eq!(
        condition(&s, "Ready"),
        cond("False", "InsufficientResources")
    );
    let note = env.wait_event("walk", "InsufficientResources").await;
    assert!(note.contains("Insufficient memory"), "{note}");

    env.vmi(
        "walk",
        json!({"phase": "Running", "nodeName": "node-a", "interfaces": [
            {"name": "default", "ipAddress": "10.244.0.7", "ipAddresses": ["10.244.0.7", "fd10::7"]}]}),
    )
    .await;
    let s = env
        .wait_status("walk", "Running", |s| s.phase.as_deref() == Some("Running"))
        .await;
    assert_eq!(condition(&s, "Ready"), cond("True", "Running"));
    assert_eq!(s.node_name.as_deref(), Some("node-a"));
    assert_eq!(s.ip_addresses, ["10.244.0.7", "fd10::7"]);
    assert_eq!(s.vmi_name.as_deref(), Some("walk"));
    let storage_since = s
        .conditions
        .iter()
        .find(|c| c.type_ == "StorageReady")
        .map(|c| c.last_transition_time.clone());
    assert_eq!(
        storage_since, bound_at,
        "unchanged conditions keep their transition time"
    );
    env.wait_event("walk", "Running").await;

    // Stop: the VM halts, KubeVirt removes the VMI.
    env.machines()
        .patch(
            "walk",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"running": false}})),
        )
        .await
        .expect("stop");
    eventually(WAIT, "runStrategy Halted", || async {
        let vm = env.vm("walk").await?;
        (vm.spec.run_strategy.as_deref() == Some("Halted")).then_some(())
    })
    .await;
    env.delete_vmi("walk").await;
    let s = env
        .wait_status("walk", "Stopped", |s| s.phase.as_deref() == Some("Stopped"))
        .await;
    assert_eq!((&s.vmi_name, &s.node_name), (&None, &None));
    assert!(s.ip_addresses.is_empty());
    assert_eq!(condition(&s, "Ready"), cond("False", "Stopped"));
    assert_eq!(s.observed_generation, Some(2));

    // Start again; KubeVirt reports a terminal failure of the new VMI.
    env.machines()
        .patch(
            "walk",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"running": true}})),
        )
        .await
        .expect("start");
    env.vmi("walk", json!({"phase": "Failed", "reason": "PodFailed"}))
        .await;
    let s = env
        .wait_status("walk", "Failed", |s| s.phase.as_deref() == Some("Failed"))
        .await;
    assert_eq!(
        condition(&s, "VirtualMachineReady"),
        cond("False", "VMFailed")
    );
}

#[tokio::test]
async fn missing_storage_class_then_created() {
    let env = env("missing-sc").await;
    let class = format!("gold-{}", env.ns);
    env.create_machine(
        "disky",
        json!({"template": "small", "disks": [{"name": "data", "size": "5Gi", "storageClass": class}]}),
    )
    .await;
    let s = env
        .wait_status("disky", "StorageClassNotFound", |s| {
            condition(s, "StorageReady").1 == "StorageClassNotFound"
        })
        .await;
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    assert_eq!(
        condition(&s, "Ready"),
        cond("False", "StorageClassNotFound")
    );
    let note = env.wait_event("disky", "StorageClassNotFound").await;
    assert!(note.contains(&class), "{note}");
    assert!(
        env.vm("disky").await.is_none(),
        "no VM while a disk cannot be made"
    );
    assert_eq!(env.pvc_names().await, ["disky-root"]);

    storage_class(&env.client, &class).await;
    env.wait_vm("disky").await;
    let s = env
        .wait_status("disky", "claims made", |s| {
            condition(s, "StorageReady").1 == "PVCPending"
        })
        .await;
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    let data = env
        .api::<PersistentVolumeClaim>()
        .get("disky-data")
        .await
        .expect("data claim");
    assert_eq!(data.spec.unwrap().storage_class_name, Some(class));
}

#[tokio::test]
async fn missing_network_configuration_then_created() {
    let env = env("missing-nc").await;
    env.create_machine(
        "netty",
        json!({"networks": [{"name": "eth0", "networkName": "prod", "macAddress": "52:54:00:aa:bb:cc"}]}),
    )
    .await;
    let s = env
        .wait_status("netty", "NetworkConfigurationNotFound", |s| {
            condition(s, "NetworkReady").1 == "NetworkConfigurationNotFound"
        })
        .await;
    assert_eq!(
        condition(&s, "Ready"),
        cond("False", "NetworkConfigurationNotFound")
    );
    env.wait_event("netty", "NetworkConfigurationNotFound")
        .await;
    assert!(env.vm("netty").await.is_none());

    env.network_configuration("prod", "br-prod", 42).await;
    let vm = env.wait_vm("netty").await;
    let iface = &vm.spec.template.spec.domain.devices.interfaces[0];
    assert_eq!(iface.mac_address.as_deref(), Some("52:54:00:aa:bb:cc"));
    let nad = env
        .api::<NetworkAttachmentDefinition>()
        .get("prod")
        .await
        .expect("NAD");
    let config: Value = serde_json::from_str(nad.spec.config.as_deref().unwrap()).unwrap();
    assert_eq!(
        (config["bridge"].clone(), config["vlan"].clone()),
        (json!("br-prod"), json!(42))
    );
    let s = env
        .wait_status("netty", "network ready", |s| {
            condition(s, "NetworkReady").0 == "True"
        })
        .await;
    assert_eq!(
        condition(&s, "NetworkReady"),
        cond("True", "NetworkConfigured")
    );
}

#[tokio::test]
async fn cloud_init_secrets() {
    let env = env("secrets").await;
    const CONTENT: &str = "#cloud-config\npassword: do-not-leak-7f3a\n";
    env.create_machine(
        "booty",
        json!({"cloudInit": {"secretRef": {"name": "boot", "key": "config"}}}),
    )
    .await;
    let s = env
        .wait_status("booty", "SecretNotFound", |s| {
            condition(s, "VirtualMachineReady").1 == "SecretNotFound"
        })
        .await;
    // Reconciled, held back: Pending is only a Machine never reconciled.
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    env.wait_event("booty", "SecretNotFound").await;

    let secrets = env.api::<Secret>();
    let mut secret = Secret {
        data: Some(BTreeMap::from([(
            "other".to_owned(),
            ByteString(b"x".to_vec()),
        )])),
        ..Secret::default()
    };
    secret.metadata.name = Some("boot".into());
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    env.wait_status("booty", "SecretKeyNotFound", |s| {
        condition(s, "VirtualMachineReady").1 == "SecretKeyNotFound"
    })
    .await;

    secrets
        .patch(
            "boot",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"config": CONTENT}})),
        )
        .await
        .expect("add key");
    let vm = env.wait_vm("booty").await;
    let derived = secrets
        .get("booty-cloudinit")
        .await
        .expect("derived Secret");
    assert_eq!(derived.data.unwrap()["userdata"].0, CONTENT.as_bytes());
    assert!(
        derived
            .metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|o| o.kind == "Machine" && o.name == "booty")
    );
    let volume = &vm.spec.template.spec.volumes[1];
    assert_eq!(
        serde_json::to_value(volume).unwrap(),
        json!({"name": "cloudinitdisk", "cloudInitNoCloud": {"secretRef": {"name": "booty-cloudinit"}}})
    );

    // The key becomes `userdata`: the VM names the user's Secret and the derived one goes.
    secrets
        .patch(
            "boot",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"userdata": CONTENT}})),
        )
        .await
        .expect("add userdata");
    env.machines()
        .patch(
            "booty",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cloudInit": {"secretRef": {"key": "userdata"}}}})),
        )
        .await
        .expect("switch key");
    eventually(WAIT, "the VM to name Secret boot", || async {
        let vm = env.vm("booty").await?;
        let r = vm.spec.template.spec.volumes[1]
            .cloud_init_no_cloud
            .as_ref()?
            .user_data_secret_ref
            .clone()?;
        (r.name == "boot").then_some(())
    })
    .await;
    eventually(WAIT, "the derived Secret to go", || async {
        env.gone::<Secret>("booty-cloudinit").await.then_some(())
    })
    .await;

    // The content never shows outside Secrets.
    let vm_text = serde_json::to_string(&env.vm("booty").await).unwrap();
    let status_text = serde_json::to_string(&env.status("booty").await).unwrap();
    let events_text = format!("{:?}", env.events("booty").await);
    for text in [vm_text, status_text, events_text, operator_log()] {
        assert!(!text.contains("do-not-leak-7f3a"));
    }
}

#[tokio::test]
async fn a_machine_that_bypassed_admission_fails_cleanly() {
    let env = env("bypassed").await;
    env.create_machine("huge", json!({"template": "huge"}))
        .await;
    env.create_machine(
        "tiny",
        json!({"template": "small", "resources": {"memory": {"size": "10Mi"}}}),
    )
    .await;
    let s = env
        .wait_status("huge", "Failed", |s| s.phase.as_deref() == Some("Failed"))
        .await;
    assert_eq!(condition(&s, "Ready"), cond("False", "TemplateNotFound"));
    let message = &s.conditions[0].message;
    assert!(
        message.contains("spec.template") && message.contains("huge"),
        "{message}"
    );
    env.wait_event("huge", "TemplateNotFound").await;
    let s = env
        .wait_status("tiny", "Failed", |s| s.phase.as_deref() == Some("Failed"))
        .await;
    assert_eq!(condition(&s, "Ready"), cond("False", "InvalidSpec"));
    assert!(s.conditions[0].message.contains("64Mi"));

    // Nothing made, no finalizer, and no hot loop: nothing is written while it stays invalid.
    let machine = env.machines().get("huge").await.unwrap();
    assert!(machine.finalizers().is_empty());
    assert!(env.vm("huge").await.is_none() && env.pvc_names().await.is_empty());
    let before = versions(&env).await;
    tokio::time::sleep(RESYNC * 3).await;
    assert_eq!(versions(&env).await, before);

    // Fixed: it is reconciled like any other.
    env.machines()
        .patch(
            "huge",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": "large"}})),
        )
        .await
        .expect("fix");
    let vm = env.wait_vm("huge").await;
    assert_eq!(vm.spec.template.spec.domain.cpu.unwrap().cores, Some(4));
    env.wait_status("huge", "Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
}

#[tokio::test]
async fn hand_edits_are_reverted() {
    let env = env("drift").await;
    env.create_machine("drifty", json!({"template": "medium"}))
        .await;
    env.wait_vm("drifty").await;
    env.wait_status("drifty", "Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
    let vms = env.api::<VirtualMachine>();
    vms.patch(
        "drifty",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"cpu": {"cores": 9}}}}}})),
    )
    .await
    .expect("hand edit");
    eventually(WAIT, "the edit to be reverted", || async {
        let vm = env.vm("drifty").await?;
        let cores = vm.spec.template.spec.domain.cpu?.cores;
        (cores == Some(2) && vm.spec.run_strategy.as_deref() == Some("Always")).then_some(())
    })
    .await;

    let uid = env.vm("drifty").await.unwrap().uid();
    vms.delete("drifty", &DeleteParams::default())
        .await
        .expect("delete VM");
    eventually(WAIT, "the VM to be recreated", || async {
        let vm = env.vm("drifty").await?;
        (vm.uid() != uid).then_some(())
    })
    .await;

    // A claim that loses our label leaves the watch and comes back labelled.
    let pvcs = env.api::<PersistentVolumeClaim>();
    pvcs.patch(
        "drifty-root",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"vitistack.io/managed-by": null}}})),
    )
    .await
    .expect("unlabel");
    eventually(WAIT, "the label to come back", || async {
        let p = pvcs.get("drifty-root").await.ok()?;
        (p.labels()
            .get("vitistack.io/managed-by")
            .map(String::as_str)
            == Some("kubevirt-operator"))
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn deletion_removes_everything_made() {
    let env = env("delete").await;
    env.network_configuration("lan", "br0", 0).await;
    let mut secret = Secret {
        data: Some(BTreeMap::from([(
            "cfg".to_owned(),
            ByteString(b"#cloud-config\n".to_vec()),
        )])),
        ..Secret::default()
    };
    secret.metadata.name = Some("boot".into());
    env.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    env.create_machine(
        "doomed",
        json!({"disks": [{"name": "data", "size": "1Gi"}],
               "networks": [{"name": "eth0", "networkName": "lan"}],
               "cloudInit": {"secretRef": {"name": "boot", "key": "cfg"}}}),
    )
    .await;
    env.wait_vm("doomed").await;
    env.wait_status("doomed", "Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
    let machine = env.machines().get("doomed").await.unwrap();
    assert_eq!(machine.finalizers(), ["machine.vitistack.io/cleanup"]);
    assert!(!env.gone::<Secret>("doomed-cloudinit").await);
    assert!(!env.gone::<NetworkAttachmentDefinition>("lan").await);

    env.machines()
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(WAIT, "the Machine to go", || async {
        env.gone::<Machine>("doomed").await.then_some(())
    })
    .await;
    assert!(env.gone::<VirtualMachine>("doomed").await);
    assert!(env.pvc_names().await.is_empty(), "no orphan PVC");
    assert!(
        env.gone::<NetworkAttachmentDefinition>("lan").await,
        "no orphan NAD"
    );
    assert!(
        env.gone::<Secret>("doomed-cloudinit").await,
        "no derived Secret left"
    );
    assert!(!env.gone::<Secret>("boot").await, "the user's Secret stays");
    assert!(
        !env.gone::<NetworkConfiguration>("lan").await,
        "the NetworkConfiguration stays"
    );
}

#[tokio::test]
async fn deletion_with_retained_disks_releases_them() {
    let env = env("retain").await;
    env.create_machine_with(json!({
        "metadata": {"name": "keeper", "annotations": {"vitistack.io/retain-disks": "true"}},
        "spec": {"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}
    }))
    .await;
    env.wait_vm("keeper").await;
    env.wait_status("keeper", "Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
    let uid = env.machines().get("keeper").await.unwrap().uid().unwrap();
    env.machines()
        .delete("keeper", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(WAIT, "the Machine to go", || async {
        env.gone::<Machine>("keeper").await.then_some(())
    })
    .await;
    assert!(env.gone::<VirtualMachine>("keeper").await);
    let mut names = env.pvc_names().await;
    names.sort();
    assert_eq!(names, ["keeper-data", "keeper-root"]);
    for p in env
        .api::<PersistentVolumeClaim>()
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        assert!(
            p.owner_references().iter().all(|o| o.uid != uid),
            "{} still owned by the deleted Machine",
            p.name_any()
        );
        assert!(p.metadata.deletion_timestamp.is_none());
    }

    // A new Machine of the same name takes the disks over.
    env.create_machine_with(json!({
        "metadata": {"name": "keeper"},
        "spec": {"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}
    }))
    .await;
    env.wait_vm("keeper").await;
    let new_uid = env.machines().get("keeper").await.unwrap().uid().unwrap();
    eventually(
        WAIT,
        "the retained disks to be owned by the new Machine",
        || async {
            let pvcs = env
                .api::<PersistentVolumeClaim>()
                .list(&ListParams::default())
                .await
                .ok()?;
            pvcs.items
                .iter()
                .all(|p| p.owner_references().iter().any(|o| o.uid == new_uid))
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn deletion_waits_for_the_vmi() {
    let env = env("delete-vmi").await;
    env.create_machine("busy", json!({"template": "small"}))
        .await;
    env.wait_vm("busy").await;
    env.vmi("busy", json!({"phase": "Running", "nodeName": "node-a"}))
        .await;
    env.wait_status("busy", "Running", |s| s.phase.as_deref() == Some("Running"))
        .await;
    env.machines()
        .delete("busy", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(WAIT, "the VM to be deleted", || async {
        env.gone::<VirtualMachine>("busy").await.then_some(())
    })
    .await;
    tokio::time::sleep(RESYNC * 2).await;
    assert!(
        !env.gone::<Machine>("busy").await,
        "held while the VMI runs"
    );
    assert_eq!(
        env.pvc_names().await,
        ["busy-root"],
        "disks kept while the VMI runs"
    );
    env.delete_vmi("busy").await;
    eventually(WAIT, "the Machine to go", || async {
        env.gone::<Machine>("busy").await.then_some(())
    })
    .await;
    assert!(env.pvc_names().await.is_empty());
}

#[tokio::test]
async fn a_shared_attachment_stays_while_used() {
    let env = env("shared-nad").await;
    env.network_configuration("lan", "br0", 3).await;
    for m in ["one", "two"] {
        env.create_machine(
            m,
            json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lan"}]}),
        )
        .await;
        env.wait_vm(m).await;
    }
    env.machines()
        .delete("one", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "one to go", || async {
        env.gone::<Machine>("one").await.then_some(())
    })
    .await;
    assert!(
        !env.gone::<NetworkAttachmentDefinition>("lan").await,
        "two still uses it"
    );
    env.machines()
        .delete("two", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "two to go", || async {
        env.gone::<Machine>("two").await.then_some(())
    })
    .await;
    assert!(env.gone::<NetworkAttachmentDefinition>("lan").await);
}

#[tokio::test]
async fn the_operator_role_is_least_privilege() {
    let env = env("rbac").await;
    let can = |verb: &str, group: &str, resource: &str| {
        let client = env.client.clone();
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(OPERATOR_USER.into()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    namespace: Some("default".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        async move {
            Api::<SubjectAccessReview>::all(client)
                .create(&PostParams::default(), &review)
                .await
                .expect("review")
                .status
                .is_some_and(|s| s.allowed)
        }
    };
    // What it uses (every other test here shows these suffice) ...
    assert!(can("patch", "kubevirt.io", "virtualmachines").await);
    assert!(can("get", "", "secrets").await);
    // ... and nothing broader.
    for (verb, group, resource) in [
        ("list", "", "secrets"),
        ("watch", "", "secrets"),
        ("delete", "vitistack.io", "machines"),
        ("create", "vitistack.io", "machines"),
        ("update", "vitistack.io", "machines"),
        ("patch", "vitistack.io", "networkconfigurations"),
        // A restore on WaitForFirstConsumer storage makes, reads and deletes one pause Pod of its
        // own (by name, deleted by uid): never lists, watches, patches or updates pods.
        ("list", "", "pods"),
        ("patch", "", "pods"),
        ("update", "", "pods"),
        ("create", "kubevirt.io", "virtualmachineinstances"),
        ("patch", "coordination.k8s.io", "leases"),
        ("create", "storage.k8s.io", "storageclasses"),
    ] {
        assert!(
            !can(verb, group, resource).await,
            "{verb} {group}/{resource} is granted"
        );
    }
}
