//! Hand edits reverted, deletion and its releases, shared attachments, the operator's role.

use crate::operator::{OPERATOR_USER, RESYNC, eventually};
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubevirt_operator::api::{Machine, NetworkConfiguration};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use serde_json::json;
use std::collections::BTreeMap;

#[tokio::test]
async fn hand_edits_are_reverted() {
    let env = env("drift").await;
    env.create_machine("drifty", json!({"template": "medium"}))
        .await;
    env.wait_vm("drifty").await;
    env.wait_status("drifty", "Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
    let vms = env.api::<VirtualMachine>();
    vms.patch(
        "drifty",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"cpu": {"cores": 9}}}}}})),
    )
    .await
    .expect("hand edit");
    eventually(WAIT, "the edit to be reverted", || async {
        let vm = env.vm("drifty").await?;
        let cores = vm.spec.template.spec.domain.cpu?.cores;
        (cores == Some(2) && vm.spec.run_strategy.as_deref() == Some("Always")).then_some(())
    })
    .await;

    let uid = env.vm("drifty").await.unwrap().uid();
    vms.delete("drifty", &DeleteParams::default())
        .await
        .expect("delete VM");
    eventually(WAIT, "the VM to be recreated", || async {
        let vm = env.vm("drifty").await?;
        (vm.uid() != uid).then_some(())
    })
    .await;

    // A claim that loses our label leaves the watch and comes back labelled.
    let pvcs = env.api::<PersistentVolumeClaim>();
    pvcs.patch(
        "drifty-root",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"vitistack.io/managed-by": null}}})),
    )
    .await
    .expect("unlabel");
    eventually(WAIT, "the label to come back", || async {
        let p = pvcs.get("drifty-root").await.ok()?;
        (p.labels()
            .get("vitistack.io/managed-by")
            .map(String::as_str)
            == Some("kubevirt-operator"))
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn deletion_removes_everything_made() {
    let env = env("delete").await;
    env.network_configuration("lan", "br0", 0).await;
    let mut secret = Secret {
        data: Some(BTreeMap::from([(
            "cfg".to_owned(),
            ByteString(b"#cloud-config\n".to_vec()),
        )])),
        ..Secret::default()
    };
    secret.metadata.name = Some("boot".into());
    env.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    env.create_machine(
        "doomed",
        json!({"disks": [{"name": "data", "size": "1Gi"}],
               "networks": [{"name": "eth0", "networkName": "lan"}],
               "cloudInit": {"secretRef": {"name": "boot", "key": "cfg"}}}),
    )
    .await;
    env.wait_vm("doomed").await;
    env.wait_status("doomed", "Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
    let machine = env.machines().get("doomed").await.unwrap();
    assert_eq!(machine.finalizers(), ["machine.vitistack.io/cleanup"]);
    assert!(!env.gone::<Secret>("doomed-cloudinit").await);
    assert!(!env.gone::<NetworkAttachmentDefinition>("lan").await);

    env.machines()
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(WAIT, "the Machine to go", || async {
        env.gone::<Machine>("doomed").await.then_some(())
    })
    .await;
    assert!(env.gone::<VirtualMachine>("doomed").await);
    assert!(env.pvc_names().await.is_empty(), "no orphan PVC");
    assert!(
        env.gone::<NetworkAttachmentDefinition>("lan").await,
        "no orphan NAD"
    );
    assert!(
        env.gone::<Secret>("doomed-cloudinit").await,
        "no derived Secret left"
    );
    assert!(!env.gone::<Secret>("boot").await, "the user's Secret stays");
    assert!(
        !env.gone::<NetworkConfiguration>("lan").await,
        "the NetworkConfiguration stays"
    );
}

#[tokio::test]
async fn deletion_with_retained_disks_releases_them() {
    let env = env("retain").await;
    env.create_machine_with(json!({
        "metadata": {"name": "keeper", "annotations": {"vitistack.io/retain-disks": "true"}},
        "spec": {"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}
    }))
    .await;
    env.wait_vm("keeper").await;
    env.wait_status("keeper", "Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
    let uid = env.machines().get("keeper").await.unwrap().uid().unwrap();
    env.machines()
        .delete("keeper", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(WAIT, "the Machine to go", || async {
        env.gone::<Machine>("keeper").await.then_some(())
    })
    .await;
    assert!(env.gone::<VirtualMachine>("keeper").await);
    let mut names = env.pvc_names().await;
    names.sort();
    assert_eq!(names, ["keeper-data", "keeper-root"]);
    for p in env
        .api::<PersistentVolumeClaim>()
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        assert!(
            p.owner_references().iter().all(|o| o.uid != uid),
            "{} still owned by the deleted Machine",
            p.name_any()
        );
        assert!(p.metadata.deletion_timestamp.is_none());
    }

    // A new Machine of the same name takes the disks over.
    env.create_machine_with(json!({
        "metadata": {"name": "keeper"},
        "spec": {"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}
    }))
    .await;
    env.wait_vm("keeper").await;
    let new_uid = env.machines().get("keeper").await.unwrap().uid().unwrap();
    eventually(
        WAIT,
        "the retained disks to be owned by the new Machine",
        || async {
            let pvcs = env
                .api::<PersistentVolumeClaim>()
                .list(&ListParams::default())
                .await
                .ok()?;
            pvcs.items
                .iter()
                .all(|p| p.owner_references().iter().any(|o| o.uid == new_uid))
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn deletion_waits_for_the_vmi() {
    let env = env("delete-vmi").await;
    env.create_machine("busy", json!({"template": "small"}))
        .await;
    env.wait_vm("busy").await;
    env.vmi("busy", json!({"phase": "Running", "nodeName": "node-a"}))
        .await;
    env.wait_status("busy", "Running", |s| s.phase.as_deref() == Some("Running"))
        .await;
    env.machines()
        .delete("busy", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(WAIT, "the VM to be deleted", || async {
        env.gone::<VirtualMachine>("busy").await.then_some(())
    })
    .await;
    tokio::time::sleep(RESYNC * 2).await;
    assert!(
        !env.gone::<Machine>("busy").await,
        "held while the VMI runs"
    );
    assert_eq!(
        env.pvc_names().await,
        ["busy-root"],
        "disks kept while the VMI runs"
    );
    env.delete_vmi("busy").await;
    eventually(WAIT, "the Machine to go", || async {
        env.gone::<Machine>("busy").await.then_some(())
    })
    .await;
    assert!(env.pvc_names().await.is_empty());
}

#[tokio::test]
async fn a_shared_attachment_stays_while_used() {
    let env = env("shared-nad").await;
    env.network_configuration("lan", "br0", 3).await;
    for m in ["one", "two"] {
        env.create_machine(
            m,
            json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lan"}]}),
        )
        .await;
        env.wait_vm(m).await;
    }
    env.machines()
        .delete("one", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "one to go", || async {
        env.gone::<Machine>("one").await.then_some(())
    })
    .await;
    assert!(
        !env.gone::<NetworkAttachmentDefinition>("lan").await,
        "two still uses it"
    );
    env.machines()
        .delete("two", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "two to go", || async {
        env.gone::<Machine>("two").await.then_some(())
    })
    .await;
    assert!(env.gone::<NetworkAttachmentDefinition>("lan").await);
}

#[tokio::test]
async fn the_operator_role_is_least_privilege() {
    let env = env("rbac").await;
    let can = |verb: &str, group: &str, resource: &str| {
        let client = env.client.clone();
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(OPERATOR_USER.into()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    namespace: Some("default".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        async move {
            Api::<SubjectAccessReview>::all(client)
                .create(&PostParams::default(), &review)
                .await
                .expect("review")
                .status
                .is_some_and(|s| s.allowed)
        }
    };
    // What it uses (every other test here shows these suffice) ...
    assert!(can("patch", "kubevirt.io", "virtualmachines").await);
    assert!(can("get", "", "secrets").await);
    assert!(can("get", "", "namespaces").await);
    // ... and nothing broader.
    for (verb, group, resource) in [
        ("list", "", "secrets"),
        ("watch", "", "secrets"),
        ("delete", "vitistack.io", "machines"),
        ("create", "vitistack.io", "machines"),
        ("update", "vitistack.io", "machines"),
        ("patch", "vitistack.io", "networkconfigurations"),
        // A restore on WaitForFirstConsumer storage makes, reads and deletes one pause Pod of its
        // own (by name, deleted by uid): never lists, watches, patches or updates pods.
        ("list", "", "pods"),
        ("patch", "", "pods"),
        ("update", "", "pods"),
        ("create", "kubevirt.io", "virtualmachineinstances"),
        ("patch", "coordination.k8s.io", "leases"),
        ("create", "storage.k8s.io", "storageclasses"),
        // Nodes are only listed and watched, for their Ready condition (issue 33).
        ("get", "", "nodes"),
        ("patch", "", "nodes"),
        ("update", "", "nodes"),
        ("delete", "", "nodes"),
        // A KubevirtConfig's namespaceSelector reads a Namespace by name (`get`), no more.
        ("list", "", "namespaces"),
        ("watch", "", "namespaces"),
        ("patch", "", "namespaces"),
        ("update", "", "namespaces"),
        ("delete", "", "namespaces"),
    ] {
        assert!(
            !can(verb, group, resource).await,
            "{verb} {group}/{resource} is granted"
        );
    }
}
