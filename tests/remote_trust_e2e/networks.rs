//! A NetworkConfiguration replaced with `--force` leaves its remote Machines Ready;
//! `vitistack.io/abandon-remote` takes "true" or "false" only.

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::{Machine, NetworkConfiguration};
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use serde_json::json;

use crate::access::{create_admitted, machines};
use crate::{NS, condition, on_dc1, start, status_when, until, vm, world};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_configuration_replaced_with_force_leaves_its_remote_machines_ready() {
    let w = world().await;
    let op = start(&w.mgmt, &[]).await;
    let ncs = Api::<DynamicObject>::namespaced_with(
        w.admin.clone(),
        NS,
        &ApiResource::erase::<NetworkConfiguration>(&()),
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
