//! The reconciler's own placement check, for Machines stored past the webhook: one stored in a
//! namespace its KubevirtConfig's `namespaceSelector` does not select is not worked on there.

use crate::access::{machines, start_operator, wait_status};
use crate::support::eventually_with;
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
use kube::api::{Patch, PatchParams};
use kubevirt_operator::api::MachineStatus;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

const OUTSIDE: &str = "team-b";

fn cluster_ready(s: &MachineStatus) -> Option<(&str, &str, &str)> {
    let c = s.conditions.iter().find(|c| c.type_ == "ClusterReady")?;
    Some((c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

async fn label_tenant_a(admin: &Client, ns: &str) {
    let label = json!({"metadata": {"labels": {"tenant": "a"}}});
    Api::<Namespace>::all(admin.clone())
        .patch(ns, &PatchParams::default(), &Patch::Merge(label))
        .await
        .expect("label");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_stored_past_the_webhook_outside_the_selector_is_not_placed() {
    let (mgmt, remote) = planes(Fixture::new().namespace(OUTSIDE)).await;
    let admin = mgmt.admin_client().await;
    label_tenant_a(&admin, NS).await;
    let tenant_a = json!({"namespaceSelector": {"matchLabels": {"tenant": "a"}}});
    register(&admin, &remote, "dc1", tenant_a).await;
    // Stored while no webhook is installed (as while it was down, or bypassed): the admin
    // writes both, one in a selected namespace, one outside.
    let small = json!({"template": "small"});
    let pp = PostParams::default();
    (machines(&admin, NS).create(&pp, &machine("inside", Some("dc1"), small.clone())))
        .await
        .expect("inside");
    (machines(&admin, OUTSIDE).create(&pp, &machine("outside", Some("dc1"), small)))
        .await
        .expect("outside");
    let args = ["--kubevirt-config-probe-interval", "1s"];
    let op = start_operator(&mgmt, OP_NS, &args).await;
    let far = remote.admin_client().await;
    let far_vms = |ns: &str| Api::<VirtualMachine>::namespaced(far.clone(), ns);

    // The selected one is made there: the cluster is usable ...
    eventually_with(
        WAIT,
        "inside's VM on dc1",
        || op.log_tail(60),
        || async { far_vms(NS).get_opt("inside").await.ok().flatten() },
    )
    .await;
    // ... and the other is refused by the reconciler, saying why.
    let s = wait_status(&admin, OUTSIDE, "outside", &op, "PlacementForbidden", |s| {
        cluster_ready(s).is_some_and(|c| c.1 == "PlacementForbidden")
    })
    .await;
    let (status, _, message) = cluster_ready(&s).expect("ClusterReady");
    assert_eq!(status, "False");
    assert!(
        message.contains(
            r#"KubevirtConfig dc1: its namespaceSelector does not select namespace "team-b""#
        ),
        "{message}"
    );
    assert_eq!(s.cluster.as_deref(), Some("dc1"));
    // Nothing of it on the remote: no namespace, VM or claim.
    let far_ns = Api::<Namespace>::all(far.clone());
    assert!(
        far_ns.get_opt(OUTSIDE).await.expect("read").is_none(),
        "namespace made"
    );
    assert!(
        far_vms(OUTSIDE)
            .get_opt("outside")
            .await
            .expect("read")
            .is_none()
    );
    let claims = Api::<PersistentVolumeClaim>::namespaced(far.clone(), OUTSIDE);
    assert!(
        claims
            .get_opt("outside-root")
            .await
            .expect("read")
            .is_none()
    );

    // Once the namespace is selected, the same Machine is placed: the check follows the labels.
    label_tenant_a(&admin, OUTSIDE).await;
    eventually_with(
        WAIT,
        "outside's VM on dc1",
        || op.log_tail(60),
        || async { far_vms(OUTSIDE).get_opt("outside").await.ok().flatten() },
    )
    .await;
}
