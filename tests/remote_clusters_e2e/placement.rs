//! Where Machines go: placed by annotation on dc1 (first refused, then rotated to good
//! credentials) or locally; status back from there; never moved.

use base64::Engine;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::access::wait_status;
use crate::support::{Proc, Started};
use crate::{NS, OP_NS, claim, condition, create, kubevirt, until, vm};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

/// KubevirtConfig `dc1`: the remote cluster, through a kubeconfig Secret.
pub async fn dc1(admin: &Client, remote: &Started) {
    // dc1: the remote cluster, through a kubeconfig Secret.
    // First credentials the remote refuses (401); rotated to good ones below.
    let ca = base64::engine::general_purpose::STANDARD.encode(remote.ca_pem());
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: r, cluster: {{server: '{}', certificate-authority-data: {ca}}}}}]\nusers: [{{name: u, user: {{token: not-a-token}}}}]\ncontexts: [{{name: r, context: {{cluster: r, user: u}}}}]\ncurrent-context: r\n",
        remote.server_url()
    );
    crate::access::register_cluster(admin, "dc1", Some(kubeconfig)).await;
}

/// Machines far (on dc1) and near (local); far's VM once dc1's credentials are rotated.
pub async fn placed(
    admin: &Client,
    far_admin: &Client,
    remote: &Started,
    op: &Proc,
) -> VirtualMachine {
    // Placed by annotation, and locally.
    create(
        admin,
        op,
        "far",
        json!({"vitistack.io/kubevirt-config": "dc1"}),
    )
    .await;
    create(admin, op, "near", json!({})).await;
    let s = wait_status(admin, NS, "far", op, "far's cluster refuses us", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&s, "ClusterReady"),
        Some(("False", "Unauthorized"))
    );
    assert_eq!(s.cluster.as_deref(), Some("dc1"));
    assert!(vm(far_admin, "far").await.is_none());
    // Rotated: the reconciler takes the new credentials without a restart.
    let good = remote
        .kubeconfig_yaml(remote.admin(), None)
        .expect("remote kubeconfig");
    let rotate = json!({"stringData": {"kubeconfig": good}});
    Api::<Secret>::namespaced(admin.clone(), OP_NS)
        .patch(
            "dc1-kubeconfig",
            &PatchParams::default(),
            &Patch::Merge(rotate),
        )
        .await
        .expect("rotate the kubeconfig");
    let far_vm = until(op, "far's VM on the remote cluster", || {
        vm(far_admin, "far")
    })
    .await;
    until(op, "near's VM on the management cluster", || {
        vm(admin, "near")
    })
    .await;
    assert!(
        far_vm
            .meta()
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .is_empty(),
        "no owner reference crosses clusters"
    );
    assert!(
        far_vm.annotations().contains_key(PROOF_ANNOTATION),
        "ownership rests on the proof"
    );
    let far_claim = until(op, "far's claim there", || claim(far_admin, "far-root")).await;
    assert!(far_claim.annotations().contains_key(PROOF_ANNOTATION));
    assert!(
        vm(admin, "far").await.is_none(),
        "nothing of far on the management cluster"
    );
    assert!(claim(admin, "far-root").await.is_none());
    assert!(
        vm(far_admin, "near").await.is_none(),
        "nothing of near on the remote"
    );
    let ns = Api::<Namespace>::all(far_admin.clone())
        .get(NS)
        .await
        .expect("the Machine's namespace, made on the remote");
    assert_eq!(
        ns.labels()
            .get("vitistack.io/managed-by")
            .map(String::as_str),
        Some("kubevirt-operator")
    );
    far_vm
}

/// Status flows back from the remote VMI.
pub async fn status_flows_back(admin: &Client, far_admin: &Client, op: &Proc) {
    // Status flows back from the remote VMI.
    kubevirt::vmi(
        far_admin,
        NS,
        "far",
        json!({"phase": "Running", "nodeName": "remote-node-1",
               "interfaces": [{"name": "default", "ipAddress": "10.9.0.5"}],
               "migrationState": {"migrationUid": "m1", "sourceNode": "remote-node-0",
                                  "targetNode": "remote-node-1", "completed": true,
                                  "startTimestamp": "2026-11-25T10:00:00Z",
                                  "endTimestamp": "2026-11-25T10:00:42Z"}}),
    )
    .await;
    let s = wait_status(admin, NS, "far", op, "far runs on remote-node-1", |s| {
        s.node_name.as_deref() == Some("remote-node-1")
    })
    .await;
    assert_eq!(s.cluster.as_deref(), Some("dc1"));
    assert_eq!(s.ip_addresses, vec!["10.9.0.5".to_owned()]);
    assert_eq!(condition(&s, "ClusterReady"), Some(("True", "Ready")));
    let m = s.migration.clone().expect("the remote VMI's migration");
    assert_eq!(m.phase.as_deref(), Some("Succeeded"));
    assert_eq!(m.target_node.as_deref(), Some("remote-node-1"));
    let near = wait_status(admin, NS, "near", op, "near has a status", |_| true).await;
    assert_eq!(near.cluster, None, "a local Machine records no cluster");
    assert_eq!(condition(&near, "ClusterReady"), None);
}

/// Moving a Machine is refused at admission, and so is placing a local one later.
pub async fn moves_refused(admin: &Client) {
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    // Moving a Machine is refused at admission, and so is placing a local one later.
    for (name, to) in [
        ("far", json!("dc2")),
        ("far", Value::Null),
        ("near", json!("dc1")),
    ] {
        let patch = json!({"metadata": {"annotations": {"vitistack.io/kubevirt-config": to}}});
        let refused = api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect_err("moving a Machine must be refused");
        let message = refused.to_string();
        assert!(
            message.contains("metadata.annotations[vitistack.io/kubevirt-config]")
                && message.contains("Forbidden"),
            "{name} -> {to}: {message}"
        );
    }
}
