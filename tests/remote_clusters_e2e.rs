//! Issue 22 end to end on two real control planes: the management one (with the garbage
//! collector) runs `kubevirt-operator run` and holds Machines, the KubevirtConfig `dc1` and its
//! kubeconfig Secret; the remote one has KubeVirt's and CDI's real CRDs and nothing of ours.
//!
//! A kubeconfig the remote refuses shows `ClusterReady=False` and is rotated to a good one without
//! a restart. Machines are placed by annotation, locally, and (after a restart with
//! `--default-kubevirt-config`) by default; their objects appear on their cluster only, with no
//! owner reference there (attachments carry their NetworkConfiguration's proof); clones from
//! another namespace there need the KubevirtConfig's consent; status flows back when the test plays KubeVirt on the remote; moving a
//! Machine is refused; the remote API server stopped gives `ClusterReady=False` and loses
//! nothing, and work resumes when it is back; deletion cleans the remote up (keeping disks under
//! retain-disks), waits while the cluster is away, and goes under `vitistack.io/abandon-remote`.

mod access;
mod kubevirt;
mod support;

use base64::Engine;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use access::{WAIT, create_admitted, machines, start_operator, wait_status};
use kubevirt_operator::api::NetworkConfiguration;
use kubevirt_operator::api::names::{PROOF_ANNOTATION, RELEASE_ANNOTATION};
use kubevirt_operator::api::{KubevirtConfig, Machine, MachineStatus};
use kubevirt_operator::reconciler::apis::cdi::DataVolume;
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use support::{ControlPlane, Fixture, Proc, eventually_with};

const NS: &str = "team-a";
const OP_NS: &str = "access-operator";

fn machine(name: &str, annotations: Value) -> kube::api::DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"template": "small"}
    }))
    .expect("machine")
}

async fn create(admin: &Client, op: &Proc, name: &str, annotations: Value) {
    create_admitted(&machines(admin, NS), &machine(name, annotations), op).await;
}

fn condition<'s>(s: &'s MachineStatus, type_: &str) -> Option<(&'s str, &'s str)> {
    let c = s.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.as_str(), c.reason.as_str()))
}

async fn vm(client: &Client, name: &str) -> Option<VirtualMachine> {
    Api::<VirtualMachine>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

async fn claim(client: &Client, name: &str) -> Option<PersistentVolumeClaim> {
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

/// Waits until `f` yields, failing with the operator's log.
async fn until<T, F, Fut>(op: &Proc, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_with(WAIT, what, || op.log_tail(60), f).await
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_live_on_the_cluster_they_name() {
    let (mgmt, mut remote) = tokio::join!(
        Fixture::new()
            .with_all_crds()
            .with_controller_manager()
            .namespace(OP_NS)
            .namespace(NS)
            .start(),
        Fixture::new().with_fixture_crds().start()
    );
    let admin = mgmt.admin_client().await;
    let far_admin = remote.admin_client().await;

    // dc1: the remote cluster, through a kubeconfig Secret.
    // First credentials the remote refuses (401); rotated to good ones below.
    let ca = base64::engine::general_purpose::STANDARD.encode(remote.ca_pem());
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: r, cluster: {{server: '{}', certificate-authority-data: {ca}}}}}]\nusers: [{{name: u, user: {{token: not-a-token}}}}]\ncontexts: [{{name: r, context: {{cluster: r, user: u}}}}]\ncurrent-context: r\n",
        remote.server_url()
    );
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "dc1-kubeconfig"},
        "stringData": {"kubeconfig": kubeconfig}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(admin.clone(), OP_NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("kubeconfig Secret");
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

    let mut op = start(&mgmt, &[]).await;

    // Placed by annotation, and locally.
    create(
        &admin,
        &op,
        "far",
        json!({"vitistack.io/kubevirt-config": "dc1"}),
    )
    .await;
    create(&admin, &op, "near", json!({})).await;
    let s = wait_status(&admin, NS, "far", &op, "far's cluster refuses us", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&s, "ClusterReady"),
        Some(("False", "Unauthorized"))
    );
    assert_eq!(s.cluster.as_deref(), Some("dc1"));
    assert!(vm(&far_admin, "far").await.is_none());
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
    let far_vm = until(&op, "far's VM on the remote cluster", || {
        vm(&far_admin, "far")
    })
    .await;
    until(&op, "near's VM on the management cluster", || {
        vm(&admin, "near")
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
    let far_claim = until(&op, "far's claim there", || claim(&far_admin, "far-root")).await;
    assert!(far_claim.annotations().contains_key(PROOF_ANNOTATION));
    assert!(
        vm(&admin, "far").await.is_none(),
        "nothing of far on the management cluster"
    );
    assert!(claim(&admin, "far-root").await.is_none());
    assert!(
        vm(&far_admin, "near").await.is_none(),
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

    // Status flows back from the remote VMI.
    kubevirt::vmi(
        &far_admin,
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
    let s = wait_status(&admin, NS, "far", &op, "far runs on remote-node-1", |s| {
        s.node_name.as_deref() == Some("remote-node-1")
    })
    .await;
    assert_eq!(s.cluster.as_deref(), Some("dc1"));
    assert_eq!(s.ip_addresses, vec!["10.9.0.5".to_owned()]);
    assert_eq!(condition(&s, "ClusterReady"), Some(("True", "Ready")));
    let m = s.migration.clone().expect("the remote VMI's migration");
    assert_eq!(m.phase.as_deref(), Some("Succeeded"));
    assert_eq!(m.target_node.as_deref(), Some("remote-node-1"));
    let near = wait_status(&admin, NS, "near", &op, "near has a status", |_| true).await;
    assert_eq!(near.cluster, None, "a local Machine records no cluster");
    assert_eq!(condition(&near, "ClusterReady"), None);

    // Moving a Machine is refused at admission, and so is placing a local one later.
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
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
    create_admitted(&machines(&admin, NS), &cloning("same", NS), &op).await;
    let refused = machines(&admin, NS)
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
    create_admitted(&machines(&admin, NS), &cloning("cross", "golden"), &op).await;
    let dvs: Api<DataVolume> = Api::namespaced(far_admin.clone(), NS);
    for (name, from) in [("same", NS), ("cross", "golden")] {
        let dv = until(
            &op,
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
    wait_status(&admin, NS, "same", &op, "same's import progress", |s| {
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
    create_admitted(&machines(&admin, NS), &netted, &op).await;
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(far_admin.clone(), NS);
    let nad = until(&op, "the attachment on the remote", || async {
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
    until(&op, "netted's VM on the remote", || {
        vm(&far_admin, "netted")
    })
    .await;
    assert!(
        Api::<NetworkAttachmentDefinition>::namespaced(admin.clone(), NS)
            .get_opt("prod")
            .await
            .expect("read")
            .is_none(),
        "no attachment on the management cluster"
    );

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
    create_admitted(&machines(&admin, NS), &inited, &op).await;
    let secrets: Api<Secret> = Api::namespaced(far_admin.clone(), NS);
    let derived = until(&op, "inited's derived Secret there", || async {
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
    let inited_vm = until(&op, "inited's VM there", || vm(&far_admin, "inited")).await;
    assert!(
        serde_json::to_string(&inited_vm.spec)
            .expect("vm")
            .contains("inited-cloudinit")
    );

    // The KubevirtConfig counts its Machines: far, same, cross, netted and inited.
    let configs: Api<KubevirtConfig> = Api::all(admin.clone());
    until(&op, "dc1 counts 5 Machines", || async {
        let machines = configs.get("dc1").await.ok()?.status?.machines;
        (machines == Some(5)).then_some(())
    })
    .await;

    // The remote API server goes away: ClusterReady=False, nothing deleted anywhere.
    remote.stop_apiserver().expect("stop the remote API server");
    let s = wait_status(
        &admin,
        NS,
        "far",
        &op,
        "far says its cluster is away",
        |s| condition(s, "ClusterReady").is_some_and(|c| c.0 == "False"),
    )
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
        vm(&admin, "near").await.is_some(),
        "the local Machine is untouched"
    );
    remote.start_apiserver().await.expect("start it again");
    let far_admin = remote.client().await.expect("remote client");
    wait_status(&admin, NS, "far", &op, "far's cluster is back", |s| {
        condition(s, "ClusterReady") == Some(("True", "Ready"))
    })
    .await;
    let again = vm(&far_admin, "far")
        .await
        .expect("far's VM is still there");
    assert_eq!(again.uid(), far_vm.uid(), "never recreated");

    // Deletion cleans the remote up; retain-disks keeps the disk there, released.
    create(
        &admin,
        &op,
        "kept",
        json!({"vitistack.io/kubevirt-config": "dc1", "vitistack.io/retain-disks": "true"}),
    )
    .await;
    until(&op, "kept's claim there", || claim(&far_admin, "kept-root")).await;
    for name in ["far", "kept"] {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    until(&op, "far's VM deleted there", || async {
        vm(&far_admin, "far").await.is_none().then_some(())
    })
    .await;
    // KubeVirt takes the VMI down with its VM (no garbage collector runs on the remote here).
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(far_admin.clone(), NS);
    vmis.delete("far", &DeleteParams::default())
        .await
        .expect("KubeVirt deletes far's VMI");
    until(
        &op,
        "far and kept gone from the management cluster",
        || async {
            let left = api.list(&Default::default()).await.ok()?;
            let names: Vec<String> = left.items.iter().map(|m| m.name_any()).collect();
            (!names.contains(&"far".to_owned()) && !names.contains(&"kept".to_owned()))
                .then_some(())
        },
    )
    .await;
    let gone = claim(&far_admin, "far-root").await;
    assert!(
        gone.is_none_or(|c| c.meta().deletion_timestamp.is_some()),
        "far's disk is deleted there"
    );
    let kept = claim(&far_admin, "kept-root")
        .await
        .expect("kept's disk stays");
    assert!(kept.meta().deletion_timestamp.is_none());
    assert!(
        kept.annotations().contains_key(RELEASE_ANNOTATION),
        "released"
    );

    // Placed by default: a Machine without the annotation goes to dc1; near stays local.
    op.kill();
    let op = start(&mgmt, &["--default-kubevirt-config", "dc1"]).await;
    create(&admin, &op, "dflt", json!({})).await;
    until(&op, "dflt's VM on the remote", || vm(&far_admin, "dflt")).await;
    let s = wait_status(&admin, NS, "dflt", &op, "dflt records dc1", |s| {
        s.cluster.is_some()
    })
    .await;
    assert_eq!(s.cluster.as_deref(), Some("dc1"));
    assert!(vm(&admin, "dflt").await.is_none());
    let dflt = api.get("dflt").await.expect("dflt");
    assert_eq!(
        dflt.annotations()
            .get("vitistack.io/kubevirt-config")
            .map(String::as_str),
        Some("dc1"),
        "the webhook wrote the default into it"
    );
    let near = wait_status(&admin, NS, "near", &op, "near reconciled again", |_| true).await;
    assert_eq!(near.cluster, None, "a default never moves a Machine");
    assert!(vm(&admin, "near").await.is_some());
    assert!(vm(&far_admin, "near").await.is_none());

    // Its cluster away, a deletion waits (the finalizer stays) until the admin abandons it.
    remote.stop_apiserver().expect("stop the remote API server");
    wait_status(
        &admin,
        NS,
        "dflt",
        &op,
        "dflt says its cluster is away",
        |s| condition(s, "ClusterReady").is_some_and(|c| c.0 == "False"),
    )
    .await;
    api.delete("dflt", &DeleteParams::default())
        .await
        .expect("delete");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let waiting = api.get("dflt").await.expect("dflt waits for its cluster");
    assert!(waiting.meta().deletion_timestamp.is_some());
    let abandon = json!({"metadata": {"annotations": {"vitistack.io/abandon-remote": "true"}}});
    api.patch("dflt", &PatchParams::default(), &Patch::Merge(abandon))
        .await
        .expect("abandon");
    until(&op, "dflt goes without its cluster", || async {
        api.get_opt("dflt").await.ok()?.is_none().then_some(())
    })
    .await;
    remote.start_apiserver().await.expect("start it again");
    let far_admin = remote.client().await.expect("remote client");
    assert!(
        vm(&far_admin, "dflt").await.is_some(),
        "an abandoned Machine's VM is left where it was"
    );
    // Its KubevirtConfig deleted, the cluster's watches stop (its Machines say so).
    configs
        .delete("dc1", &DeleteParams::default())
        .await
        .expect("delete dc1");
    until(&op, "the remote cluster's watches stopped", || async {
        op.log_tail(400)
            .contains("stopping the watches of a remote cluster")
            .then_some(())
    })
    .await;
    // (It said Unreachable while the remote was stopped above: wait for the new reason.)
    let s = wait_status(&admin, NS, "same", &op, "same says dc1 is gone", |s| {
        condition(s, "ClusterReady") == Some(("False", "KubevirtConfigNotFound"))
    })
    .await;
    assert!(
        (s.conditions.iter()).any(|c| c.type_ == "ClusterReady" && c.message.contains("dc1")),
        "the message names the KubevirtConfig"
    );
}
