//! Issue 31 end to end on two real control planes: the management one (with the garbage
//! collector) runs `kubevirt-operator run` and holds the Machines, the KubevirtConfig `dc1` and
//! its kubeconfig Secret; the remote one has KubeVirt's, CDI's and Multus' CRDs. Every Machine is
//! written by `alice`, a user with rights on Machines (and reading NetworkConfigurations) in
//! `team-a` only.
//!
//! - A KubevirtConfig re-pointed at another cluster (here: the management cluster itself, whose
//!   kube-system uid differs) makes nothing there and says ClusterChanged, on itself and on its
//!   Machines, until an admin acknowledges the new identity.
//! - The ownership key Secret deleted and the operator restarted: the leader refuses to
//!   reconcile and names the Secret and the way out; a Machine deleted meanwhile keeps its
//!   finalizer (its VM stays); `--new-ownership-key` re-proves the remote objects (an Event each),
//!   the Machine left is Ready again and the deleted one's VM goes with it.
//! - A NetworkConfiguration replaced with `--force` (deleted and re-created: a new uid) leaves its
//!   remote Machine Ready, its attachment there re-proven for the new uid.
//! - `vitistack.io/abandon-remote` takes "true" or "false" only.

mod access;
mod support;

use std::path::Path;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use access::{WAIT, create_admitted, create_namespace, grant, machines, rule, start_operator};
use kubevirt_operator::api::names::{OWNERSHIP_KEY_SECRET, PROOF_ANNOTATION};
use kubevirt_operator::api::{KubevirtConfig, Machine, MachineStatus, NetworkConfiguration};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use support::{ControlPlane, Proc, eventually_with};

const NS: &str = "team-a";
const OP_NS: &str = "access-operator";
const USER: &str = "alice";

/// The management and the remote control plane, dc1 pointing at the remote, and alice.
struct World {
    mgmt: ControlPlane,
    remote: ControlPlane,
    admin: Client,
    far_admin: Client,
    alice: Client,
}

async fn world() -> World {
    support::init_crypto();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ours = support::crd_fixtures().expect("fixture CRDs");
    ours.push(root.join("manifests/crds.yaml"));
    let theirs = support::crd_fixtures().expect("fixture CRDs");
    let (mgmt, remote) = tokio::join!(ControlPlane::start_with_controller_manager(&ours), async {
        let cp = ControlPlane::start().await?;
        cp.install_crds(&theirs).await?;
        Ok::<_, anyhow::Error>(cp)
    });
    let (mgmt, remote) = (mgmt.expect("management"), remote.expect("remote"));
    let admin = mgmt.client().await.expect("management client");
    let far_admin = remote.client().await.expect("remote client");
    create_namespace(&admin, OP_NS).await;
    create_namespace(&admin, NS).await;
    let all = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    grant(
        &admin,
        NS,
        USER,
        vec![
            rule("vitistack.io", "machines", &all),
            rule(
                "vitistack.io",
                "networkconfigurations",
                &["get", "list", "watch"],
            ),
        ],
    )
    .await;
    let user = mgmt.mint_user(USER, &[]).expect("alice");
    let alice = mgmt.client_for(&user).await.expect("alice's client");
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

async fn start(mgmt: &ControlPlane, extra: &[&str]) -> Proc {
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

async fn until<T, F, Fut>(op: &Proc, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_with(WAIT, what, || op.log_tail(60), f).await
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_re_pointed_at_another_cluster_makes_nothing_there_until_acknowledged() {
    let w = world().await;
    let op = start(&w.mgmt, &[]).await;
    let remote_uid = kube_system_uid(&w.far_admin).await;
    let mgmt_uid = kube_system_uid(&w.admin).await;
    assert_ne!(remote_uid, mgmt_uid);

    create_admitted(
        &machines(&w.alice, NS),
        &on_dc1("far", json!({"template": "small"})),
        &op,
    )
    .await;
    until(&op, "far's VM on the remote", || vm(&w.far_admin, "far")).await;
    // The cluster's identity, recorded at first Ready on the config and on the Machine.
    until(&op, "dc1 records its cluster's identity", || async {
        let s = config_status(&w.admin).await?;
        (s["clusterIdentity"] == json!(remote_uid)).then_some(())
    })
    .await;
    status_when(&w.admin, &op, "far", "far records its cluster", |s| {
        s.cluster_identity.as_deref() == Some(remote_uid.as_str())
    })
    .await;

    // A kubeconfig of another cluster pasted into dc1's Secret (here the management cluster's).
    let wrong = w
        .mgmt
        .kubeconfig_yaml(w.mgmt.admin(), None)
        .expect("management kubeconfig");
    put_kubeconfig(&w.admin, &wrong, false).await;
    let s = until(&op, "dc1 says ClusterChanged", || async {
        let s = config_status(&w.admin).await?;
        (s["reason"] == json!("ClusterChanged")).then_some(s)
    })
    .await;
    let message = s["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.contains(&mgmt_uid)
            && message.contains(&format!("vitistack.io/acknowledge-cluster={mgmt_uid}")),
        "{message}"
    );
    assert_eq!(
        s["clusterIdentity"],
        json!(remote_uid),
        "the recorded one stays"
    );
    let far = status_when(&w.admin, &op, "far", "far says ClusterChanged", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.1 == "ClusterChanged")
    })
    .await;
    assert_eq!(condition(&far, "ClusterReady").map(|c| c.0), Some("False"));
    // A new Machine waits too; nothing of either is made on the cluster now reached.
    create_admitted(
        &machines(&w.alice, NS),
        &on_dc1("later", json!({"template": "small"})),
        &op,
    )
    .await;
    status_when(&w.admin, &op, "later", "later says ClusterChanged", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.1 == "ClusterChanged")
    })
    .await;
    // A deletion waits as well, and says how to abandon the Machine.
    let api: Api<Machine> = Api::namespaced(w.alice.clone(), NS);
    api.delete("far", &DeleteParams::default())
        .await
        .expect("alice deletes far");
    let s = status_when(
        &w.admin,
        &op,
        "far",
        "far's deletion says how to abandon it",
        |s| condition(s, "ClusterReady").is_some_and(|c| c.2.contains("abandon-remote=true")),
    )
    .await;
    assert_eq!(
        condition(&s, "ClusterReady").map(|c| c.1),
        Some("ClusterChanged")
    );
    for name in ["far", "later"] {
        assert!(
            vm(&w.admin, name).await.is_none(),
            "{name} made on the wrong cluster"
        );
    }
    assert!(
        api.get_opt("far").await.expect("read").is_some(),
        "far keeps its finalizer"
    );
    assert!(
        vm(&w.far_admin, "far").await.is_some(),
        "far's VM is untouched"
    );

    // The admin acknowledges the move: work goes on there, and dc1 records the new identity.
    let ack = json!({"metadata": {"annotations": {"vitistack.io/acknowledge-cluster": mgmt_uid}}});
    Api::<KubevirtConfig>::all(w.admin.clone())
        .patch("dc1", &PatchParams::default(), &Patch::Merge(ack))
        .await
        .expect("acknowledge");
    until(&op, "later's VM on the cluster now reached", || {
        vm(&w.admin, "later")
    })
    .await;
    let s = until(&op, "dc1 Ready again", || async {
        let s = config_status(&w.admin).await?;
        (s["reason"] == json!("Ready")).then_some(s)
    })
    .await;
    assert_eq!(s["clusterIdentity"], json!(mgmt_uid));
    status_when(
        &w.admin,
        &op,
        "later",
        "later records the new cluster",
        |s| s.cluster_identity.as_deref() == Some(mgmt_uid.as_str()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_ownership_key_is_never_replaced_silently() {
    let w = world().await;
    let mut op = start(&w.mgmt, &[]).await;
    for name in ["kept", "gone"] {
        create_admitted(
            &machines(&w.alice, NS),
            &on_dc1(name, json!({"template": "small"})),
            &op,
        )
        .await;
    }
    let old_vm = until(&op, "kept's VM on the remote", || vm(&w.far_admin, "kept")).await;
    until(&op, "gone's VM on the remote", || vm(&w.far_admin, "gone")).await;
    status_when(&w.admin, &op, "kept", "kept is placed", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "True")
    })
    .await;

    // The key Secret is lost (a backup restored without Secrets), and the operator restarted.
    op.kill();
    let secrets = Api::<Secret>::namespaced(w.admin.clone(), OP_NS);
    secrets
        .delete(OWNERSHIP_KEY_SECRET, &DeleteParams::default())
        .await
        .expect("delete the key");
    let op = start(&w.mgmt, &[]).await;
    let refusal = until(&op, "the leader refuses, naming the Secret", || async {
        let log = op.log_tail(200);
        log.contains(&format!("{OP_NS}/{OWNERSHIP_KEY_SECRET} is missing"))
            .then_some(log)
    })
    .await;
    assert!(
        refusal.contains("--new-ownership-key") && refusal.contains("VirtualMachine team-a/"),
        "{refusal}"
    );
    assert!(
        secrets
            .get_opt(OWNERSHIP_KEY_SECRET)
            .await
            .expect("read")
            .is_none(),
        "no new key made silently"
    );
    // A Machine deleted meanwhile keeps its finalizer: its VM is still there.
    let refusals = || op.log_tail(2000).matches("is missing").count();
    let before = refusals();
    let api: Api<Machine> = Api::namespaced(w.alice.clone(), NS);
    api.delete("gone", &DeleteParams::default())
        .await
        .expect("alice deletes gone");
    until(&op, "the refusal repeated after the deletion", || async {
        (refusals() > before).then_some(())
    })
    .await;
    assert!(
        api.get_opt("gone").await.expect("read").is_some(),
        "gone waits"
    );
    assert!(
        vm(&w.far_admin, "gone").await.is_some(),
        "gone's VM is not orphaned"
    );
    let mut op = op;
    op.kill();

    // The admin accepts a new key: the remote objects are re-proven, an Event each.
    let op = start(&w.mgmt, &["--new-ownership-key"]).await;
    let reproven = until(&op, "kept's VM re-proven", || async {
        let vm = vm(&w.far_admin, "kept").await?;
        let proof = vm.annotations().get(PROOF_ANNOTATION)?.clone();
        (Some(&proof) != old_vm.annotations().get(PROOF_ANNOTATION)).then_some(vm)
    })
    .await;
    assert_eq!(reproven.uid(), old_vm.uid(), "the very VM, not a new one");
    until(&op, "an Event on kept", || async {
        let events = support::events_about(&w.admin, NS, "kept").await;
        events
            .iter()
            .any(|(_, reason, note)| {
                reason == "OwnershipReproven" && note.contains("VirtualMachine kept")
            })
            .then_some(())
    })
    .await;
    let key = secrets
        .get(OWNERSHIP_KEY_SECRET)
        .await
        .expect("the new key");
    assert!(
        key.annotations()
            .contains_key("vitistack.io/replaces-lost-key")
    );
    let s = status_when(&w.admin, &op, "kept", "kept is placed again", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert!(
        !s.conditions.iter().any(|c| c.reason.ends_with("Conflict")),
        "{:?}",
        s.conditions
    );
    // gone's deletion finishes: its VM deleted there, then the Machine.
    until(&op, "gone's VM deleted there", || async {
        vm(&w.far_admin, "gone").await.is_none().then_some(())
    })
    .await;
    until(&op, "gone goes", || async {
        api.get_opt("gone").await.ok()?.is_none().then_some(())
    })
    .await;
    drop(w.remote);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_configuration_replaced_with_force_leaves_its_remote_machines_ready() {
    let w = world().await;
    let op = start(&w.mgmt, &[]).await;
    let ncs = Api::<DynamicObject>::namespaced_with(
        w.admin.clone(),
        NS,
        &kube::api::ApiResource::erase::<NetworkConfiguration>(&()),
    );
    let network: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration",
        "metadata": {"name": "prod"}, "spec": {"bridge": "br0"}
    }))
    .expect("network");
    // Created once the webhooks answer (the operator fills their caBundle once up).
    let first = create_admitted(&ncs, &network, &op).await;
    let netted = on_dc1(
        "netted",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "prod"}]}),
    );
    create_admitted(&machines(&w.alice, NS), &netted, &op).await;
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(w.far_admin.clone(), NS);
    let proof_of =
        |nad: &NetworkAttachmentDefinition| nad.annotations().get(PROOF_ANNOTATION).cloned();
    let nad = until(&op, "the attachment on the remote", || async {
        nads.get_opt("prod").await.ok().flatten()
    })
    .await;
    let old_proof = proof_of(&nad).expect("proven");
    assert!(
        old_proof.starts_with(&first.uid().expect("uid")),
        "{old_proof}"
    );
    status_when(&w.admin, &op, "netted", "netted's network ready", |s| {
        condition(s, "NetworkReady").is_some_and(|c| c.0 == "True")
    })
    .await;

    // kubectl replace --force: deleted, then created again under the same name (a new uid).
    ncs.delete("prod", &DeleteParams::default())
        .await
        .expect("delete");
    until(&op, "the first prod gone", || async {
        ncs.get_opt("prod").await.ok()?.is_none().then_some(())
    })
    .await;
    let second = create_admitted(&ncs, &network, &op).await;
    let new_uid = second.uid().expect("uid");
    until(&op, "the attachment re-proven for the new uid", || async {
        let nad = nads.get_opt("prod").await.ok().flatten()?;
        proof_of(&nad)?.starts_with(&new_uid).then_some(())
    })
    .await;
    let s = status_when(
        &w.admin,
        &op,
        "netted",
        "netted Ready on the new NetworkConfiguration",
        |s| condition(s, "NetworkReady").is_some_and(|c| c.0 == "True"),
    )
    .await;
    assert_eq!(condition(&s, "ClusterReady").map(|c| c.0), Some("True"));
    assert!(vm(&w.far_admin, "netted").await.is_some());

    // abandon-remote takes "true" or "false" only, and the denial names the field.
    let api: Api<Machine> = Api::namespaced(w.alice.clone(), NS);
    let bad = json!({"metadata": {"annotations": {"vitistack.io/abandon-remote": "yes"}}});
    let refused = api
        .patch("netted", &PatchParams::default(), &Patch::Merge(bad))
        .await
        .expect_err("a value other than true/false")
        .to_string();
    assert!(
        refused.contains("metadata.annotations[vitistack.io/abandon-remote]")
            && refused.contains("supported values: \"false\", \"true\""),
        "{refused}"
    );
    drop(w.remote);
}
