//! dc1 away and back, deletions there, placement by default, a deletion abandoned there, and
//! dc1 deleted.

use std::time::Duration;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::access::wait_status;
use crate::support::{Proc, Started};
use crate::{NS, claim, condition, create, until, vm};
use kubevirt_operator::api::names::RELEASE_ANNOTATION;
use kubevirt_operator::api::{KubevirtConfig, Machine};
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};

/// The remote API server goes away and comes back: nothing deleted anywhere, nothing made
/// again. Returns a client of the remote API server started again.
pub async fn away_and_back(
    admin: &Client,
    remote: &mut Started,
    op: &Proc,
    far_vm: &VirtualMachine,
) -> Client {
    // The remote API server goes away: ClusterReady=False, nothing deleted anywhere.
    remote.stop_apiserver().expect("stop the remote API server");
    let s = wait_status(admin, NS, "far", op, "far says its cluster is away", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&s, "ClusterReady"),
        Some(("False", "Unreachable"))
    );
    assert_eq!(condition(&s, "Ready").map(|c| c.0), Some("False"));
    assert_eq!(
        s.node_name.as_deref(),
        Some("remote-node-1"),
        "what was seen is kept"
    );
    assert!(
        vm(admin, "near").await.is_some(),
        "the local Machine is untouched"
    );
    remote.start_apiserver().await.expect("start it again");
    let far_admin = remote.client().await.expect("remote client");
    wait_status(admin, NS, "far", op, "far's cluster is back", |s| {
        condition(s, "ClusterReady") == Some(("True", "Ready"))
    })
    .await;
    let again = vm(&far_admin, "far")
        .await
        .expect("far's VM is still there");
    assert_eq!(again.uid(), far_vm.uid(), "never recreated");
    far_admin
}

/// Deletion cleans the remote up; retain-disks keeps the disk there, released.
pub async fn deletion(admin: &Client, far_admin: &Client, op: &Proc) {
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    create(
        admin,
        op,
        "kept",
        json!({"vitistack.io/kubevirt-config": "dc1", "vitistack.io/retain-disks": "true"}),
    )
    .await;
    until(op, "kept's claim there", || claim(far_admin, "kept-root")).await;
    for name in ["far", "kept"] {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    until(op, "far's VM deleted there", || async {
        vm(far_admin, "far").await.is_none().then_some(())
    })
    .await;
    // KubeVirt takes the VMI down with its VM (no garbage collector runs on the remote here).
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(far_admin.clone(), NS);
    vmis.delete("far", &DeleteParams::default())
        .await
        .expect("KubeVirt deletes far's VMI");
    until(
        op,
        "far and kept gone from the management cluster",
        || async {
            let left = api.list(&Default::default()).await.ok()?;
            let names: Vec<String> = left.items.iter().map(|m| m.name_any()).collect();
            (!names.contains(&"far".to_owned()) && !names.contains(&"kept".to_owned()))
                .then_some(())
        },
    )
    .await;
    let gone = claim(far_admin, "far-root").await;
    assert!(
        gone.is_none_or(|c| c.meta().deletion_timestamp.is_some()),
        "far's disk is deleted there"
    );
    let kept = claim(far_admin, "kept-root")
        .await
        .expect("kept's disk stays");
    assert!(kept.meta().deletion_timestamp.is_none());
    assert!(
        kept.annotations().contains_key(RELEASE_ANNOTATION),
        "released"
    );
}

/// Placed by default (the operator runs with `--default-kubevirt-config dc1`).
pub async fn placed_by_default(admin: &Client, far_admin: &Client, op: &Proc) {
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    create(admin, op, "dflt", json!({})).await;
    until(op, "dflt's VM on the remote", || vm(far_admin, "dflt")).await;
    let s = wait_status(admin, NS, "dflt", op, "dflt records dc1", |s| {
        s.cluster.is_some()
    })
    .await;
    assert_eq!(s.cluster.as_deref(), Some("dc1"));
    assert!(vm(admin, "dflt").await.is_none());
    let dflt = api.get("dflt").await.expect("dflt");
    assert_eq!(
        dflt.annotations()
            .get("vitistack.io/kubevirt-config")
            .map(String::as_str),
        Some("dc1"),
        "the webhook wrote the default into it"
    );
    let near = wait_status(admin, NS, "near", op, "near reconciled again", |_| true).await;
    assert_eq!(near.cluster, None, "a default never moves a Machine");
    assert!(vm(admin, "near").await.is_some());
    assert!(vm(far_admin, "near").await.is_none());
}

/// Its cluster away, a deletion waits (the finalizer stays) until the admin abandons it.
pub async fn abandoned(admin: &Client, remote: &mut Started, op: &Proc) {
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    remote.stop_apiserver().expect("stop the remote API server");
    wait_status(
        admin,
        NS,
        "dflt",
        op,
        "dflt says its cluster is away",
        |s| condition(s, "ClusterReady").is_some_and(|c| c.0 == "False"),
    )
    .await;
    api.delete("dflt", &DeleteParams::default())
        .await
        .expect("delete");
    // A window, not a wait for a state: a deletion that did not wait would remove the finalizer
    // as soon as the operator sees it (one watch event away).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let waiting = api.get("dflt").await.expect("dflt waits for its cluster");
    assert!(waiting.meta().deletion_timestamp.is_some());
    let abandon = json!({"metadata": {"annotations": {"vitistack.io/abandon-remote": "true"}}});
    api.patch("dflt", &PatchParams::default(), &Patch::Merge(abandon))
        .await
        .expect("abandon");
    until(op, "dflt goes without its cluster", || async {
        api.get_opt("dflt").await.ok()?.is_none().then_some(())
    })
    .await;
    remote.start_apiserver().await.expect("start it again");
    let far_admin = remote.client().await.expect("remote client");
    assert!(
        vm(&far_admin, "dflt").await.is_some(),
        "an abandoned Machine's VM is left where it was"
    );
}

/// Its KubevirtConfig deleted, the cluster's watches stop (its Machines say so).
pub async fn config_deleted(admin: &Client, op: &Proc) {
    let configs: Api<KubevirtConfig> = Api::all(admin.clone());
    configs
        .delete("dc1", &DeleteParams::default())
        .await
        .expect("delete dc1");
    until(op, "the remote cluster's watches stopped", || async {
        op.log_tail(400)
            .contains("stopping the watches of a remote cluster")
            .then_some(())
    })
    .await;
    // (It said Unreachable while the remote was stopped above: wait for the new reason.)
    let s = wait_status(admin, NS, "same", op, "same says dc1 is gone", |s| {
        condition(s, "ClusterReady") == Some(("False", "KubevirtConfigNotFound"))
    })
    .await;
    assert!(
        (s.conditions.iter()).any(|c| c.type_ == "ClusterReady" && c.message.contains("dc1")),
        "the message names the KubevirtConfig"
    );
}
