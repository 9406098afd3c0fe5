//! A KubevirtConfig re-pointed at another cluster makes nothing there until acknowledged. The
//! other cluster is a third control plane: the management cluster's own `team-a` was not made by
//! the operator, so a Machine moved there would only say `NamespaceConflict` (see `namespaces`).

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kubevirt_operator::api::{KubevirtConfig, Machine};
use serde_json::json;

use crate::access::{create_admitted, machines};
use crate::support::Fixture;
use crate::{
    NS, condition, config_status, kube_system_uid, on_dc1, put_kubeconfig, start, status_when,
    until, vm, world,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_re_pointed_at_another_cluster_makes_nothing_there_until_acknowledged() {
    let (w, other) = tokio::join!(world(), Fixture::new().with_fixture_crds().start());
    let op = start(&w.mgmt, &[]).await;
    let other_admin = other.admin_client().await;
    let remote_uid = kube_system_uid(&w.far_admin).await;
    let other_uid = kube_system_uid(&other_admin).await;
    assert_ne!(remote_uid, other_uid);

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

    // A kubeconfig of another cluster pasted into dc1's Secret.
    let wrong = other
        .kubeconfig_yaml(other.admin(), None)
        .expect("other kubeconfig");
    put_kubeconfig(&w.admin, &wrong, false).await;
    let s = until(&op, "dc1 says ClusterChanged", || async {
        let s = config_status(&w.admin).await?;
        (s["reason"] == json!("ClusterChanged")).then_some(s)
    })
    .await;
    let message = s["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.contains(&other_uid)
            && message.contains(&format!("vitistack.io/acknowledge-cluster={other_uid}")),
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
            vm(&other_admin, name).await.is_none(),
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
    let ack = json!({"metadata": {"annotations": {"vitistack.io/acknowledge-cluster": other_uid}}});
    Api::<KubevirtConfig>::all(w.admin.clone())
        .patch("dc1", &PatchParams::default(), &Patch::Merge(ack))
        .await
        .expect("acknowledge");
    until(&op, "later's VM on the cluster now reached", || {
        vm(&other_admin, "later")
    })
    .await;
    let s = until(&op, "dc1 Ready again", || async {
        let s = config_status(&w.admin).await?;
        (s["reason"] == json!("Ready")).then_some(s)
    })
    .await;
    assert_eq!(s["clusterIdentity"], json!(other_uid));
    status_when(
        &w.admin,
        &op,
        "later",
        "later records the new cluster",
        |s| s.cluster_identity.as_deref() == Some(other_uid.as_str()),
    )
    .await;
}
