//! kube-controller-manager in the test control plane (tests/support): Kubernetes' own garbage
//! collector honours owner references under foreground, background and orphan deletion (with a
//! custom resource as the owner, so CRD kinds are covered), and its namespace controller empties
//! and removes a deleted namespace.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, PropagationPolicy,
};
use kube::{Client, ResourceExt};
use serde_json::json;
use support::{ControlPlane, Fixture, eventually_with};

const WAIT: Duration = Duration::from_secs(60);
const HOLD: &str = "tests.vitistack.io/hold";

fn vm_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
        "virtualmachines",
    )
}

async fn control_plane() -> &'static ControlPlane {
    let cp = Fixture::new()
        .with_fixture_crds()
        .with_controller_manager()
        .shared()
        .await;
    eprintln!("start-up: {:?}", cp.startup());
    cp
}

struct Env {
    cp: &'static ControlPlane,
    client: Client,
    ns: String,
}

impl Env {
    async fn new(prefix: &str) -> Env {
        let cp = control_plane().await;
        Env {
            cp,
            client: cp.client().await.expect("client"),
            ns: cp.namespace(prefix).await.expect("namespace"),
        }
    }

    fn vms(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, &vm_resource())
    }

    fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// A VirtualMachine (a custom resource) to own things.
    async fn owner(&self, name: &str) -> DynamicObject {
        let vm: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": name},
            "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {
                "memory": {"guest": "1Gi"}, "devices": {}}}}}
        }))
        .expect("VM");
        self.vms()
            .create(&PostParams::default(), &vm)
            .await
            .expect("create owner")
    }

    /// A ConfigMap controlled by `owner`, blocking its foreground deletion, with `finalizers`.
    async fn dependent(&self, name: &str, owner: &DynamicObject, finalizers: &[&str]) {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "finalizers": finalizers, "ownerReferences": [{
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                "name": owner.name_any(), "uid": owner.uid().expect("uid"),
                "controller": true, "blockOwnerDeletion": true}]}
        }))
        .expect("ConfigMap");
        self.config_maps()
            .create(&PostParams::default(), &cm)
            .await
            .expect("create dependent");
    }

    async fn delete_owner(&self, name: &str, policy: PropagationPolicy) {
        let params = DeleteParams {
            propagation_policy: Some(policy),
            ..DeleteParams::default()
        };
        self.vms()
            .delete(name, &params)
            .await
            .expect("delete owner");
    }

    async fn until<T, F, Fut>(&self, what: &str, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        eventually_with(WAIT, what, || self.cp.logs(), check).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_waits_for_the_dependent_and_then_removes_the_owner() {
    let env = Env::new("gc-foreground").await;
    let owner = env.owner("owner").await;
    env.dependent("dependent", &owner, &[HOLD]).await;
    env.delete_owner("owner", PropagationPolicy::Foreground)
        .await;

    // The garbage collector deletes the dependent first; the owner waits for it.
    env.until("the dependent to be deleting", || async {
        let cm = env.config_maps().get_opt("dependent").await.ok()??;
        cm.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await;
    let held = env.vms().get("owner").await.expect("owner still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(
        held.finalizers().iter().any(|f| f == "foregroundDeletion"),
        "{:?}",
        held.finalizers()
    );

    // Once the dependent goes, the owner follows.
    env.config_maps()
        .patch(
            "dependent",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("release the dependent");
    env.until("the owner to go", || async {
        env.vms()
            .get_opt("owner")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        env.config_maps()
            .get_opt("dependent")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletion_removes_the_dependent_after_the_owner() {
    let env = Env::new("gc-background").await;
    let owner = env.owner("owner").await;
    env.dependent("dependent", &owner, &[]).await;
    env.delete_owner("owner", PropagationPolicy::Background)
        .await;
    env.until("the dependent to go", || async {
        env.config_maps()
            .get_opt("dependent")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(env.vms().get_opt("owner").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_keeps_the_dependent_without_its_owner_reference() {
    let env = Env::new("gc-orphan").await;
    let owner = env.owner("owner").await;
    env.dependent("dependent", &owner, &[]).await;
    env.delete_owner("owner", PropagationPolicy::Orphan).await;
    env.until("the owner to go", || async {
        env.vms()
            .get_opt("owner")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    env.until("the owner reference to be removed", || async {
        let cm = env.config_maps().get_opt("dependent").await.ok()??;
        cm.owner_references().is_empty().then_some(())
    })
    .await;
    let cm = env.config_maps().get("dependent").await.unwrap();
    assert!(cm.metadata.deletion_timestamp.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_is_emptied_and_removed() {
    let env = Env::new("gc-namespace").await;
    env.owner("vm").await;
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "plain"}})).expect("ConfigMap");
    env.config_maps()
        .create(&PostParams::default(), &cm)
        .await
        .expect("ConfigMap");
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    namespaces
        .delete(&env.ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    env.until("the namespace to go", || async {
        namespaces
            .get_opt(&env.ns)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(env.vms().get_opt("vm").await.unwrap().is_none());
    assert!(env.config_maps().get_opt("plain").await.unwrap().is_none());
}
