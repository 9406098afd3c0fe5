//! What Machines on dc1 make there: clones (with the KubevirtConfig's consent from another
//! namespace), attachments, derived cloud-init Secrets; and dc1 counting them.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::access::{create_admitted, machines, wait_status};
use crate::support::Proc;
use crate::{NS, until, vm};
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::{KubevirtConfig, NetworkConfiguration};
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;

/// Clones name objects on the remote.
pub async fn clones(admin: &Client, far_admin: &Client, op: &Proc) {
    // Clones name objects on the remote: from the Machine's own namespace there, admitted; from
    // another, only once the KubevirtConfig allows it (the author cannot be asked there).
    let cloning = |name: &str, ns: &str| {
        serde_json::from_value::<kube::api::DynamicObject>(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "annotations": {"vitistack.io/kubevirt-config": "dc1"}},
            "spec": {"template": "small", "disks": [{"name": "data", "size": "1Gi",
                     "source": {"pvc": {"namespace": ns, "name": "golden-image"}}}]}
        }))
        .expect("machine")
    };
    create_admitted(&machines(admin, NS), &cloning("same", NS), op).await;
    let refused = machines(admin, NS)
        .create(&PostParams::default(), &cloning("cross", "golden"))
        .await
        .expect_err("a clone from another namespace there needs the KubevirtConfig's consent")
        .to_string();
    assert!(
        refused.contains("spec.disks[1].source.pvc.namespace")
            && refused.contains("allowCrossNamespaceClones: true"),
        "{refused}"
    );
    let allow = json!({"spec": {"allowCrossNamespaceClones": true}});
    Api::<KubevirtConfig>::all(admin.clone())
        .patch("dc1", &PatchParams::default(), &Patch::Merge(allow))
        .await
        .expect("allow cross-namespace clones");
    create_admitted(&machines(admin, NS), &cloning("cross", "golden"), op).await;
    let dvs: Api<DataVolume> = Api::namespaced(far_admin.clone(), NS);
    for (name, from) in [("same", NS), ("cross", "golden")] {
        let dv = until(
            op,
            &format!("{name}'s DataVolume on the remote"),
            || async { dvs.get_opt(&format!("{name}-data")).await.ok().flatten() },
        )
        .await;
        let source = serde_json::to_value(&dv.spec).expect("spec");
        assert_eq!(
            source["source"]["pvc"]["namespace"],
            json!(from),
            "{source}"
        );
        assert!(
            dv.meta()
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .is_empty()
        );
        assert!(dv.annotations().contains_key(PROOF_ANNOTATION));
    }
    // CDI's progress there reaches the Machine's status.disks.
    let progress = json!({"status": {"phase": "ImportInProgress", "progress": "42.0%"}});
    dvs.patch_status(
        "same-data",
        &PatchParams::default(),
        &Patch::Merge(progress),
    )
    .await
    .expect("play CDI on the remote");
    wait_status(admin, NS, "same", op, "same's import progress", |s| {
        s.disks
            .iter()
            .any(|d| d.name == "data" && d.progress.as_deref() == Some("42.0%"))
    })
    .await;
    assert!(
        Api::<DataVolume>::namespaced(admin.clone(), NS)
            .get_opt("same-data")
            .await
            .expect("read")
            .is_none()
    );
}

/// A Machine on a network: its attachment there.
pub async fn networks(admin: &Client, far_admin: &Client, op: &Proc) {
    // Networks: the attachment is made there, proven for its NetworkConfiguration (which
    // stays here), with no owner reference.
    let network: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration",
        "metadata": {"name": "prod"}, "spec": {"bridge": "br0"}
    }))
    .expect("network");
    let ncs = Api::<kube::api::DynamicObject>::namespaced_with(
        admin.clone(),
        NS,
        &kube::api::ApiResource::erase::<NetworkConfiguration>(&()),
    );
    ncs.create(&PostParams::default(), &network)
        .await
        .expect("NetworkConfiguration");
    let netted: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "netted", "annotations": {"vitistack.io/kubevirt-config": "dc1"}},
        "spec": {"template": "small", "networks": [{"name": "eth0", "networkName": "prod"}]}
    }))
    .expect("machine");
    create_admitted(&machines(admin, NS), &netted, op).await;
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(far_admin.clone(), NS);
    let nad = until(op, "the attachment on the remote", || async {
        nads.get_opt("prod").await.ok().flatten()
    })
    .await;
    assert!(
        nad.meta()
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );
    assert!(nad.annotations().contains_key(PROOF_ANNOTATION));
    until(op, "netted's VM on the remote", || vm(far_admin, "netted")).await;
    assert!(
        Api::<NetworkAttachmentDefinition>::namespaced(admin.clone(), NS)
            .get_opt("prod")
            .await
            .expect("read")
            .is_none(),
        "no attachment on the management cluster"
    );
}

/// A Machine with cloud-init: the data there, the user's Secret here.
pub async fn cloud_init(admin: &Client, far_admin: &Client, op: &Proc) {
    // The user's cloud-init Secret stays here; its data reaches the VM there in the derived
    // Secret.
    let boot: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "boot"},
        "stringData": {"userdata": "#cloud-config\nhostname: inited\n"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &boot)
        .await
        .expect("the user's Secret");
    let inited: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "inited", "annotations": {"vitistack.io/kubevirt-config": "dc1"}},
        "spec": {"template": "small", "cloudInit": {"secretRef": {"name": "boot"}}}
    }))
    .expect("machine");
    create_admitted(&machines(admin, NS), &inited, op).await;
    let secrets: Api<Secret> = Api::namespaced(far_admin.clone(), NS);
    let derived = until(op, "inited's derived Secret there", || async {
        secrets.get_opt("inited-cloudinit").await.ok().flatten()
    })
    .await;
    let data = derived.data.clone().unwrap_or_default();
    assert_eq!(data["userdata"].0, b"#cloud-config\nhostname: inited\n");
    assert!(
        derived
            .meta()
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );
    assert!(
        secrets.get_opt("boot").await.expect("read").is_none(),
        "the user's stays here"
    );
    let inited_vm = until(op, "inited's VM there", || vm(far_admin, "inited")).await;
    assert!(
        serde_json::to_string(&inited_vm.spec)
            .expect("vm")
            .contains("inited-cloudinit")
    );
}

pub async fn counted(admin: &Client, op: &Proc) {
    // The KubevirtConfig counts its Machines: far, same, cross, netted and inited.
    let configs: Api<KubevirtConfig> = Api::all(admin.clone());
    until(op, "dc1 counts 5 Machines", || async {
        let machines = configs.get("dc1").await.ok()?.status?.machines;
        (machines == Some(5)).then_some(())
    })
    .await;
}
