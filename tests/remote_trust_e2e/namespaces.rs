//! A remote namespace is used only if the operator made it: one that already exists there
//! without the operator's proof (our labels copied onto it included) is left untouched and the
//! Machine says `NamespaceConflict`; one being deleted is waited for (`NamespaceTerminating`);
//! once it is gone the operator makes it, with its proof, and the Machine is Ready. A namespace
//! as an operator from before namespace proofs left it (labelled, holding a proven VM) is
//! adopted after a restart. One of ours deleted while in use is found again within a minute.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubevirt_operator::api::names::{MANAGED_BY, MANAGED_BY_LABEL, PROOF_ANNOTATION};
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use serde_json::json;

use crate::access::{create_admitted, machines};
use crate::{NS, condition, on_dc1, start, status_when, until, vm, world};

/// How many VMs, claims, DataVolumes and Secrets `ns` holds on the cluster of `client`.
async fn written_into(client: &kube::Client, ns: &str) -> usize {
    let lp = ListParams::default();
    let (vms, claims, dvs, secrets) = (
        Api::<VirtualMachine>::namespaced(client.clone(), ns),
        Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns),
        Api::<DataVolume>::namespaced(client.clone(), ns),
        Api::<Secret>::namespaced(client.clone(), ns),
    );
    let (vms, claims, dvs, secrets) = tokio::join!(
        vms.list(&lp),
        claims.list(&lp),
        dvs.list(&lp),
        secrets.list(&lp)
    );
    vms.expect("vms").items.len()
        + claims.expect("claims").items.len()
        + dvs.expect("dvs").items.len()
        + secrets.expect("secrets").items.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_remote_namespace_is_left_untouched_with_namespace_conflict() {
    let w = world().await;
    // Someone else's team-a on the remote, wearing our label and a made-up proof.
    let far_ns = Api::<Namespace>::all(w.far_admin.clone());
    let foreign: Namespace = serde_json::from_value(json!({
        "metadata": {"name": NS,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "annotations": {PROOF_ANNOTATION: "uid-ks.forged"}}
    }))
    .expect("namespace");
    let planted = far_ns
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign namespace");
    let op = start(&w.mgmt, &[]).await;
    let one = on_dc1("one", json!({"template": "small"}));
    create_admitted(&machines(&w.alice, NS), &one, &op).await;

    let s = status_when(&w.admin, &op, "one", "NamespaceConflict", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.1 == "NamespaceConflict")
    })
    .await;
    let (status, _, message) = condition(&s, "ClusterReady").expect("ClusterReady");
    assert_eq!(status, "False");
    assert!(
        message.contains("namespace team-a already exists on cluster dc1")
            && message.contains("not made by kubevirt-operator"),
        "{message}"
    );
    // Nothing written into it, nor onto it.
    assert_eq!(written_into(&w.far_admin, NS).await, 0);
    let now = far_ns.get(NS).await.expect("namespace");
    assert_eq!(now.resource_version(), planted.resource_version());

    // Being deleted (the remote runs no namespace controller: it stays Terminating): a wait.
    far_ns
        .delete(NS, &DeleteParams::default())
        .await
        .expect("delete");
    status_when(&w.admin, &op, "one", "NamespaceTerminating", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.1 == "NamespaceTerminating")
    })
    .await;
    assert_eq!(written_into(&w.far_admin, NS).await, 0);
    // The namespace controller's part, played: its finalizer removed, the namespace goes.
    let mut terminating = far_ns.get(NS).await.expect("namespace");
    if let Some(spec) = terminating.spec.as_mut() {
        spec.finalizers = Some(vec![]);
    }
    far_ns
        .replace_subresource("finalize", NS, &PostParams::default(), &terminating)
        .await
        .expect("finalize");

    // Gone: the operator makes it, with its proof, and the Machine is made there.
    until(&op, "one's VM on dc1", || async {
        vm(&w.far_admin, "one").await
    })
    .await;
    let made = far_ns.get(NS).await.expect("namespace");
    assert_ne!(made.uid(), planted.uid());
    let labels: &BTreeMap<String, String> = made.labels();
    assert_eq!(
        labels.get(MANAGED_BY_LABEL).map(String::as_str),
        Some(MANAGED_BY)
    );
    let proof = made.annotations().get(PROOF_ANNOTATION).cloned();
    let identity = crate::kube_system_uid(&w.far_admin).await;
    assert!(
        proof
            .as_deref()
            .is_some_and(|p| p.starts_with(&format!("{identity}."))),
        "{proof:?}"
    );
    status_when(&w.admin, &op, "one", "ClusterReady", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "True")
    })
    .await;

    // As an operator from before namespace proofs left it: labelled, holding one's proven VM,
    // no proof. After a restart it is adopted (its proof written once), and one stays Ready.
    let mut op = op;
    op.kill();
    let strip = json!({"metadata": {"annotations": {PROOF_ANNOTATION: null}}});
    far_ns
        .patch(NS, &PatchParams::default(), &Patch::Merge(strip))
        .await
        .expect("strip the proof");
    let op = start(&w.mgmt, &[]).await;
    until(&op, "the namespace proven again", || async {
        let ns = far_ns.get(NS).await.ok()?;
        (ns.annotations().get(PROOF_ANNOTATION) == proof.as_ref()).then_some(())
    })
    .await;
    let s = status_when(&w.admin, &op, "one", "one ClusterReady", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&s, "ClusterReady").map(|c| c.1),
        Some("Ready"),
        "{s:?}"
    );

    // Ours, then deleted while in use: found again within the operator's minute, a wait.
    far_ns
        .delete(NS, &DeleteParams::default())
        .await
        .expect("delete");
    status_when(&w.admin, &op, "one", "NamespaceTerminating again", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.1 == "NamespaceTerminating")
    })
    .await;
    drop(w.remote);
}
