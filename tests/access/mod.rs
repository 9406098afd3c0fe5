//! Shared by the access e2e tests: `kubevirt-operator run` with self-managed certificates on a
//! dedicated control plane (it registers its webhooks for the whole cluster), namespaces, users'
//! Roles, and reading the API server's denials.

#![allow(dead_code, unused_imports)] // Not every test binary uses every helper or re-export.

pub mod stream;

use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, Error};

pub use crate::support::rbac::{grant, rule};
pub use crate::support::replica::{start_follower, start_operator, start_replica};
use crate::support::{self, Fixture, Proc};
use kubevirt_operator::api::Machine;

pub const WAIT: Duration = Duration::from_secs(90);
/// The operator's namespace in these tests.
pub const OP_NS: &str = "access-operator";

/// Namespace `name`, labelled with its name as kube-apiserver 1.21+ does (the test control
/// plane, 1.20, does not): the webhooks select watched namespaces by that label.
pub async fn create_namespace(admin: &Client, name: &str) {
    support::create_namespace(admin, name)
        .await
        .expect("namespace");
}

pub fn denial<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Api(e)) => {
            assert_eq!(e.code, 403, "{e:?}");
            e.message
        }
        other => panic!("expected the API server to deny, got {other:?}"),
    }
}

/// The webhook's denial of creating `obj`, retried until the webhooks are in force (their
/// configurations are installed before the operator starts; it fills their caBundle once up).
pub async fn first_denial(
    api: &Api<DynamicObject>,
    params: &PostParams,
    obj: &DynamicObject,
    op: &Proc,
) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(params, obj).await {
            Err(Error::Api(e)) if e.message.contains("admission webhook") => return e.message,
            other => assert!(
                Instant::now() < deadline,
                "webhooks not in force: {other:?}\n{}",
                op.log_tail(60)
            ),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Creates `obj` once the webhooks answer: until the operator has filled the installed
/// configurations' caBundle, kube-apiserver cannot call them and refuses the write.
pub async fn create_admitted(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    op: &Proc,
) -> DynamicObject {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(&PostParams::default(), obj).await {
            Ok(created) => return created,
            Err(Error::Api(e))
                if e.message.contains("failed calling webhook") && Instant::now() < deadline => {}
            Err(e) => panic!("not admitted: {e}\n{}", op.log_tail(60)),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Creates `obj` as `api`'s user once the replica answers with a verdict, and says what it
/// answered (kube-apiserver may not call it yet, and a replica that has not listed the Machines
/// and networks asks to retry): the object, or the refusal's code and message.
pub async fn create_answered(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    op: &Proc,
) -> Result<DynamicObject, (u16, String)> {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(&PostParams::default(), obj).await {
            Ok(created) => return Ok(created),
            Err(Error::Api(e))
                if (e.message.contains("failed calling webhook")
                    || e.message.contains("retry shortly"))
                    && Instant::now() < deadline => {}
            Err(Error::Api(e)) => return Err((e.code, e.message)),
            Err(e) => panic!("{e}\n{}", op.log_tail(60)),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

pub fn machines(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Machine>(&()))
}

/// The access tests' set-up: every CRD, namespaces `access-operator` and `team-a`, and the
/// operator (with `extra` flags) on a control plane of its own; add users and Roles, then start.
pub fn fixture(extra: &[&str]) -> Fixture {
    Fixture::new()
        .with_all_crds()
        .namespace(OP_NS)
        .namespace("team-a")
        .webhook_operator(OP_NS, extra)
}

/// Machine `name`'s status once `pred` holds, or a panic naming `what` with the operator's log.
pub async fn wait_status(
    admin: &Client,
    ns: &str,
    name: &str,
    op: &Proc,
    what: &str,
    pred: impl Fn(&kubevirt_operator::api::MachineStatus) -> bool,
) -> kubevirt_operator::api::MachineStatus {
    let api: Api<Machine> = Api::namespaced(admin.clone(), ns);
    support::eventually_with(
        WAIT,
        what,
        || op.log_tail(40),
        || async {
            let status = api.get_opt(name).await.ok().flatten()?.status?;
            pred(&status).then_some(status)
        },
    )
    .await
}

/// A Machine named `name` with `spec`, as a user would write it.
pub fn machine_object(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("machine")
}

/// KubevirtConfig `name` for the cluster `kubeconfig` reaches (`None`: its Secret is not made,
/// so the config cannot be looked at), the Secret `<name>-kubeconfig` in [`OP_NS`].
pub async fn register_cluster(admin: &Client, name: &str, kubeconfig: Option<String>) {
    let secret_name = format!("{name}-kubeconfig");
    if let Some(kubeconfig) = kubeconfig {
        let secret: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name},
                "stringData": {"kubeconfig": kubeconfig}
            }))
            .expect("secret");
        Api::namespaced(admin.clone(), OP_NS)
            .create(&PostParams::default(), &secret)
            .await
            .expect("kubeconfig Secret");
    }
    let config: kubevirt_operator::api::KubevirtConfig =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
            "metadata": {"name": name},
            "spec": {"kubeconfigSecretRef": secret_name, "secretNamespace": OP_NS}
        }))
        .expect("config");
    Api::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("KubevirtConfig");
}
