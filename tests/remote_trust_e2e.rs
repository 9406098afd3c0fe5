//! Issue 31 end to end on two real control planes: the management one (with the garbage
//! collector) runs `kubevirt-operator run` and holds the Machines, the KubevirtConfig `dc1` and
//! its kubeconfig Secret; the remote one has KubeVirt's, CDI's and Multus' CRDs. Every Machine is
//! written by `alice`, a user with rights on Machines (and reading NetworkConfigurations) in
//! `team-a` only, and what a remote Machine's author is asked: `use` on dc1, `update` and
//! `delete` on claims in `team-a`.
//!
//! - A KubevirtConfig re-pointed at another cluster (a third control plane, whose kube-system
//!   uid differs) makes nothing there and says ClusterChanged, on itself and on its
//!   Machines, until an admin acknowledges the new identity (`identity`).
//! - The ownership key Secret deleted and the operator restarted: the leader refuses to
//!   reconcile and names the Secret and the way out; a Machine deleted meanwhile keeps its
//!   finalizer (its VM stays); `--new-ownership-key` re-proves the remote objects (an Event each),
//!   the Machine left is Ready again and the deleted one's VM goes with it (`key`).
//! - A NetworkConfiguration replaced with `--force` (deleted and re-created: a new uid) leaves its
//!   remote Machine Ready, its attachment there re-proven for the new uid; and
//!   `vitistack.io/abandon-remote` takes "true" or "false" only (`networks`).
//! - A remote namespace that exists without the operator's proof is left untouched and its
//!   Machines say NamespaceConflict; one being deleted is waited for; once gone it is made,
//!   with its proof; one left without it by an earlier operator is adopted (`namespaces`).
//! - The credentials a disk source names are copied to the remote namespace with a proof, the
//!   DataVolume there names the copies, a copy follows its source and goes with its Machine, and
//!   a foreign object of a copy's name is never overwritten (`credentials`).
//! - A `dataSource` clone is resolved on the remote cluster, never the management one: refused
//!   without CDI's clone right in `team-a`, then made there from what the remote DataSource
//!   points to; a missing, unready or cross-namespace one makes nothing and says why
//!   (`data_sources`).

mod access;
mod support;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use access::{WAIT, rule, start_operator};
use kubevirt_operator::api::{KubevirtConfig, MachineStatus};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use support::{Fixture, Proc, Started, eventually_with};

const NS: &str = "team-a";
const OP_NS: &str = "access-operator";
const USER: &str = "alice";

/// The management and the remote control plane, dc1 pointing at the remote, and alice.
struct World {
    mgmt: Started,
    remote: Started,
    admin: Client,
    far_admin: Client,
    alice: Client,
}

async fn world() -> World {
    let all = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let alice_rules = vec![
        rule("vitistack.io", "machines", &all),
        rule(
            "vitistack.io",
            "networkconfigurations",
            &["get", "list", "watch"],
        ),
        // What a remote Machine's author is asked (tests/remote_access_e2e.rs): `update` and
        // `delete` on every new disk's claim, and `use` on dc1 below.
        rule("", "persistentvolumeclaims", &["update", "delete"]),
    ];
    let use_dc1 = PolicyRule {
        api_groups: Some(vec!["vitistack.io".into()]),
        resources: Some(vec!["kubevirtconfigs".into()]),
        resource_names: Some(vec!["dc1".into()]),
        verbs: vec!["use".into()],
        ..Default::default()
    };
    let (mgmt, remote) = tokio::join!(
        Fixture::new()
            .with_all_crds()
            .with_controller_manager()
            .namespace(OP_NS)
            .namespace(NS)
            .user(USER, &[])
            .grant(NS, USER, alice_rules)
            .grant_cluster(USER, vec![use_dc1])
            .start(),
        Fixture::new().with_fixture_crds().start()
    );
    let admin = mgmt.admin_client().await;
    let far_admin = remote.admin_client().await;
    let alice = mgmt.client_of(USER).await;
    let kubeconfig = remote
        .kubeconfig_yaml(remote.admin(), None)
        .expect("remote kubeconfig");
    put_kubeconfig(&admin, &kubeconfig, true).await;
    let config: KubevirtConfig = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": {"name": "dc1"},
        "spec": {"kubeconfigSecretRef": "dc1-kubeconfig", "secretNamespace": OP_NS}
    }))
    .expect("config");
    Api::<KubevirtConfig>::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("KubevirtConfig");
    World {
        mgmt,
        remote,
        admin,
        far_admin,
        alice,
    }
}

/// Creates (or rewrites) dc1's kubeconfig Secret.
async fn put_kubeconfig(admin: &Client, kubeconfig: &str, create: bool) {
    let secrets = Api::<Secret>::namespaced(admin.clone(), OP_NS);
    if create {
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "dc1-kubeconfig"},
            "stringData": {"kubeconfig": kubeconfig}
        }))
        .expect("secret");
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .expect("kubeconfig Secret");
    } else {
        let patch = json!({"stringData": {"kubeconfig": kubeconfig}});
        secrets
            .patch(
                "dc1-kubeconfig",
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .expect("re-point the kubeconfig");
    }
}

/// The operator on the management cluster, probing every second.
async fn start(mgmt: &Started, extra: &[&str]) -> Proc {
    let mut args = vec![
        "--kubevirt-config-probe-interval",
        "1s",
        "--allowed-bridges",
        "br0",
    ];
    args.extend_from_slice(extra);
    start_operator(mgmt, OP_NS, &args).await
}

fn on_dc1(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "annotations": {"vitistack.io/kubevirt-config": "dc1"}},
        "spec": spec
    }))
    .expect("machine")
}

/// Waits until `f` yields, failing with the operator's log.
async fn until<T, F, Fut>(op: &Proc, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_with(WAIT, what, || op.log_tail(60), f).await
}

/// A condition's (status, reason, message).
fn condition<'s>(s: &'s MachineStatus, type_: &str) -> Option<(&'s str, &'s str, &'s str)> {
    let c = s.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

/// Machine `name`'s status (read as the admin) once `pred` holds.
async fn status_when(
    admin: &Client,
    op: &Proc,
    name: &str,
    what: &str,
    pred: impl Fn(&MachineStatus) -> bool,
) -> MachineStatus {
    access::wait_status(admin, NS, name, op, what, pred).await
}

async fn vm(client: &Client, name: &str) -> Option<VirtualMachine> {
    Api::<VirtualMachine>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

async fn kube_system_uid(client: &Client) -> String {
    Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await
        .expect("kube-system")
        .uid()
        .expect("uid")
}

async fn config_status(admin: &Client) -> Option<Value> {
    let c = Api::<KubevirtConfig>::all(admin.clone())
        .get("dc1")
        .await
        .ok()?;
    serde_json::to_value(c.status?).ok()
}

/// The tests, by subject, in tests/remote_trust_e2e/ (still one test binary).
mod remote_trust_e2e {
    mod credentials;
    mod data_sources;
    mod identity;
    mod key;
    mod namespaces;
    mod networks;
}
