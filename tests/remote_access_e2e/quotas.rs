//! What a ResourceQuota of the Machine's namespace on the management cluster bounds for a
//! remote Machine: the Machines stored there, not what is made on the remote cluster.

use crate::access::{create_admitted, machines, start_operator};
use crate::support::eventually_with;
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, ResourceQuota};
use kube::api::{Patch, PatchParams};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn management_quotas_bound_machines_not_what_the_remote_runs() {
    let (mgmt, remote) = planes(Fixture::new()).await;
    let admin = mgmt.admin_client().await;
    register(&admin, &remote, "dc1", json!({})).await;
    // team-a may hold one Machine, and no claim, storage or VM at all.
    let hard = json!({"count/machines.vitistack.io": "1", "persistentvolumeclaims": "0",
        "requests.storage": "0", "count/virtualmachines.kubevirt.io": "0"});
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "team-a"}, "spec": {"hard": hard}
    }))
    .expect("quota");
    let quotas = Api::<ResourceQuota>::namespaced(admin.clone(), NS);
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("quota");
    // The quota controller's part, played: nothing is used yet. From here kube-apiserver's
    // ResourceQuota admission enforces it and counts each admitted object itself.
    let used = json!({"count/machines.vitistack.io": "0", "persistentvolumeclaims": "0",
        "requests.storage": "0", "count/virtualmachines.kubevirt.io": "0"});
    let status = json!({"status": {"hard": hard, "used": used}});
    quotas
        .patch_status("team-a", &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("quota status");
    let args = ["--kubevirt-config-probe-interval", "1s"];
    let op = start_operator(&mgmt, OP_NS, &args).await;
    let api = machines(&admin, NS);
    let one = machine(
        "one",
        Some("dc1"),
        json!({"template": "small", "disks": [
        {"name": "data", "size": "10Gi"}]}),
    );
    create_admitted(&api, &one, &op).await;

    // Its claims and VM are made on dc1: team-a's quota of none does not reach there.
    let far = remote.admin_client().await;
    let far_claims = Api::<PersistentVolumeClaim>::namespaced(far.clone(), NS);
    for claim in ["one-root", "one-data"] {
        eventually_with(
            WAIT,
            claim,
            || op.log_tail(60),
            || async { far_claims.get_opt(claim).await.ok().flatten() },
        )
        .await;
    }
    let far_vms = Api::<VirtualMachine>::namespaced(far.clone(), NS);
    eventually_with(
        WAIT,
        "one's VM on dc1",
        || op.log_tail(60),
        || async { far_vms.get_opt("one").await.ok().flatten() },
    )
    .await;
    // The namespace the operator made there has no quota of its own.
    let far_quotas = Api::<ResourceQuota>::namespaced(far, NS);
    let listed = far_quotas
        .list(&Default::default())
        .await
        .expect("remote quotas");
    assert!(listed.items.is_empty(), "{:?}", listed.items);
    // A second Machine is over team-a's quota of Machines, wherever it would run.
    let two = machine("two", Some("dc1"), json!({"template": "small"}));
    match api.create(&PostParams::default(), &two).await {
        Err(kube::Error::Api(e)) => assert!(
            e.message.contains("exceeded quota") && e.message.contains("count/machines"),
            "{e:?}"
        ),
        other => panic!("a second Machine over the quota: {other:?}"),
    }
}
