//! Shared by the access e2e tests: `kubevirt-operator run` with self-managed certificates on a
//! dedicated control plane (it registers its webhooks for the whole cluster), namespaces, users'
//! Roles, and reading the API server's denials.

#![allow(dead_code)] // Not every test binary uses every helper.

pub mod stream;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, Error};

use crate::support::{self, ControlPlane, Proc};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::NAMESPACE_NAME_LABEL;

pub const WAIT: Duration = Duration::from_secs(90);

/// `run` with self-managed certificates, filling the webhook configurations installed here for
/// its URL (as the chart installs them in a cluster: for the whole cluster, or the namespaces of
/// `--watch-namespaces` in `extra`), hence the dedicated control plane.
pub async fn start_operator(cp: &ControlPlane, op_ns: &str, extra: &[&str]) -> Proc {
    start_replica(cp, op_ns, "access", extra).await.0
}

/// One replica of `run` named `identity` (its own ports and log directory), and its webhook
/// port. The webhook configurations are installed for this replica's URL first: the API server
/// calls the replica started last.
pub async fn start_replica(
    cp: &ControlPlane,
    op_ns: &str,
    identity: &str,
    extra: &[&str],
) -> (Proc, u16) {
    let webhook = support::free_port().expect("port");
    let scope = extra
        .iter()
        .position(|a| *a == "--watch-namespaces")
        .and_then(|i| extra.get(i + 1))
        .map(|v| kubevirt_operator::config::parse_watch_namespaces(v).expect("namespaces"))
        .unwrap_or(kubevirt_operator::config::WatchScope::All);
    let url = format!("https://127.0.0.1:{webhook}");
    let admin = cp.client().await.expect("admin client");
    support::webhooks::install(
        &admin,
        &support::webhooks::url_settings(op_ns, &url, &scope),
    )
    .await;
    (
        spawn_replica(cp, op_ns, identity, extra, &url, webhook),
        webhook,
    )
}

/// A second replica beside the one listening on `leader_port`: its own listener, but the
/// configurations keep calling the leader (as both replicas of a Deployment share a Service),
/// so the leader that fills their caBundle finds its own URL in them.
pub fn start_follower(
    cp: &ControlPlane,
    op_ns: &str,
    identity: &str,
    leader_port: u16,
) -> (Proc, u16) {
    let webhook = support::free_port().expect("port");
    let url = format!("https://127.0.0.1:{leader_port}");
    (
        spawn_replica(cp, op_ns, identity, &[], &url, webhook),
        webhook,
    )
}

fn spawn_replica(
    cp: &ControlPlane,
    op_ns: &str,
    identity: &str,
    extra: &[&str],
    url: &str,
    webhook: u16,
) -> Proc {
    let [metrics, probes] = [(); 2].map(|()| support::free_port().expect("port"));
    let dir = cp.dir().join(if identity == "access" {
        "access-operator".to_owned()
    } else {
        format!("operator-{identity}")
    });
    std::fs::create_dir_all(&dir).expect("dir");
    let mut args: Vec<String> = [
        "--log-format",
        "json",
        "run",
        "--kubeconfig",
        &cp.admin_kubeconfig().display().to_string(),
        "--namespace",
        op_ns,
        "--identity",
        identity,
        "--reconcile-interval",
        "2s",
        "--webhook-url",
        url,
        "--listen",
        &format!("127.0.0.1:{webhook}"),
        "--metrics-bind-address",
        &format!("127.0.0.1:{metrics}"),
        "--health-probe-bind-address",
        &format!("127.0.0.1:{probes}"),
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Proc::spawn(
        "kubevirt-operator",
        Path::new(env!("CARGO_BIN_EXE_kubevirt-operator")),
        args.into_iter().map(Into::into).collect(),
        dir.join("operator.log"),
    )
    .expect("spawn operator")
}

/// Labelled with its name as kube-apiserver 1.21+ does (the test control plane, 1.20, does not):
/// the webhooks select watched namespaces by that label.
pub async fn create_namespace(admin: &Client, name: &str) {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    ns.metadata.labels = Some([(NAMESPACE_NAME_LABEL.to_owned(), name.to_owned())].into());
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
}

/// A Role in `ns` with `rules`, bound to `user`.
pub async fn grant(admin: &Client, ns: &str, user: &str, rules: Vec<PolicyRule>) {
    let mut role = Role {
        rules: Some(rules),
        ..Default::default()
    };
    role.metadata.name = Some(user.into());
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let mut rb = RoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: user.into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        }]),
        ..Default::default()
    };
    rb.metadata.name = Some(user.into());
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await
        .expect("role binding");
}

pub fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..Default::default()
    }
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

pub fn machines(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Machine>(&()))
}

/// A dedicated control plane with the CRDs, namespace `team-a`, and the operator started.
pub async fn setup(extra: &[&str]) -> (ControlPlane, Client, Proc) {
    support::init_crypto();
    let cp = ControlPlane::start().await.expect("control plane");
    let mut crds = support::crd_fixtures().expect("fixture CRDs");
    crds.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/crds.yaml"));
    cp.install_crds(&crds).await.expect("CRDs");
    let admin = cp.client().await.expect("admin client");
    create_namespace(&admin, "access-operator").await;
    create_namespace(&admin, "team-a").await;
    let op = start_operator(&cp, "access-operator", extra).await;
    (cp, admin, op)
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
