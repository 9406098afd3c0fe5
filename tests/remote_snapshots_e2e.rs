//! Issue 31, snapshots and restores of a remote Machine, on two real control planes: the
//! management one runs `kubevirt-operator run` and holds the Machine, its MachineSnapshot and its
//! MachineRestore; the remote one has KubeVirt's, CDI's and KubeVirt's snapshot CRDs and nothing
//! of ours, and the operator reaches it as a user holding exactly the ClusterRole of
//! `manifests/remote-cluster-rbac.yaml`. Every Machine, snapshot and restore is written by `bob`,
//! a non-admin holding what the docs name: `get`, `create`, `update` on Machines, `create` on
//! MachineSnapshots and MachineRestores in `team-a`, `update`/`delete` on claims (asked of a
//! remote Machine's author for each new disk), and `use` on the KubevirtConfig. KubeVirt's
//! snapshot and restore controllers and the storage are played on the remote cluster.
//!
//! The VirtualMachineSnapshot and VirtualMachineRestore are made on the remote cluster (none on
//! the management one), without owner references (none reaches across clusters), proven by the
//! operator's key; the restore stops the remote VM, makes the disks again there from the restored
//! claims and starts it. With dc1's kubeconfig broken nothing is done there: a new snapshot waits
//! in `Pending` with the KubevirtConfig's reason, and deleting the MachineSnapshot waits (saying
//! how to let go); with dc1 back its VirtualMachineSnapshot there is deleted with it.

mod access;
mod kubevirt;
mod snapshots;
mod support;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use access::{OP_NS, WAIT, rule};
use kubevirt_operator::api::names::PROOF_ANNOTATION;
use kubevirt_operator::api::snapshots::{
    MachineRestore, MachineSnapshot, REMOTE_SNAPSHOT_FINALIZER,
};
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::snapshot::{
    VirtualMachineRestore, VirtualMachineSnapshot,
};
use snapshots::restore::{kubevirt_completes, kubevirt_restores};
use snapshots::{NS, claims_of, dynamic, kubevirt_took, object, restore_phase};
use support::{Fixture, Proc, eventually_with};

const BOB: &str = "bob";
const REMOTE_OPERATOR: &str = "remote-operator";

async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    op: &Proc,
    f: impl FnMut() -> F,
) -> T {
    eventually_with(WAIT, what, || op.log_tail(80), f).await
}

/// The rules of the ClusterRole `kubevirt-operator-remote` in manifests/remote-cluster-rbac.yaml.
fn remote_rules() -> Vec<PolicyRule> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/remote-cluster-rbac.yaml");
    let text = std::fs::read_to_string(path).expect("remote-cluster-rbac.yaml");
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
        .filter_map(|v: Value| serde_json::from_value::<ClusterRole>(v).ok())
        .find(|r| r.name_any() == "kubevirt-operator-remote" && r.rules.is_some())
        .and_then(|r| r.rules)
        .expect("the remote ClusterRole")
}

/// Replaces the kubeconfig in dc1's Secret.
async fn kubeconfig_secret(admin: &Client, kubeconfig: &str) {
    Api::<Secret>::namespaced(admin.clone(), OP_NS)
        .patch(
            "dc1-kubeconfig",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"stringData": {"kubeconfig": kubeconfig}})),
        )
        .await
        .expect("kubeconfig Secret");
}

/// Creates `obj` as bob once the webhook admits it (a grant reaches the webhook once its
/// remembered verdicts expire).
async fn as_bob(api: &Api<DynamicObject>, obj: &DynamicObject, op: &Proc) -> DynamicObject {
    eventually(&format!("{} admitted", obj.name_any()), op, || async {
        match api.create(&PostParams::default(), obj).await {
            Ok(made) => Some(made),
            Err(kube::Error::Api(e)) if e.code == 403 || e.message.contains("webhook") => None,
            Err(e) => panic!("not admitted: {e}\n{}", op.log_tail(60)),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_and_a_restore_of_a_remote_machine_run_on_its_cluster() {
    let args = ["--kubevirt-config-probe-interval", "1s"];
    let rights = vec![
        rule("vitistack.io", "machines", &["get", "create", "update"]),
        rule("vitistack.io", "machinesnapshots", &["create"]),
        rule("vitistack.io", "machinerestores", &["create"]),
        rule("", "persistentvolumeclaims", &["update", "delete"]),
    ];
    let mgmt = access::fixture(&args).user(BOB, &[]).grant(NS, BOB, rights);
    // No namespace there yet: the operator makes team-a for the Machine.
    let remote = Fixture::new()
        .with_fixture_crds()
        .user(REMOTE_OPERATOR, &[]);
    let (mut mgmt, remote) = tokio::join!(mgmt.start(), remote.start());
    let (admin, op) = mgmt.take_replica().await;
    let far = remote.admin_client().await;
    support::rbac::grant_cluster_role(&far, "op-remote", REMOTE_OPERATOR, remote_rules()).await;
    let kubeconfig = remote
        .kubeconfig_yaml(remote.user(REMOTE_OPERATOR), None)
        .expect("remote kubeconfig");
    // KubevirtConfig `dc1` for the remote plane, reached as `remote-operator`.
    access::register_cluster(&admin, "dc1", Some(kubeconfig.clone())).await;
    let use_dc1 = PolicyRule {
        api_groups: Some(vec!["vitistack.io".into()]),
        resources: Some(vec!["kubevirtconfigs".into()]),
        resource_names: Some(vec!["dc1".into()]),
        verbs: vec!["use".into()],
        ..Default::default()
    };
    support::rbac::grant_cluster_role(&admin, "bob-uses-dc1", BOB, vec![use_dc1]).await;
    let bob = mgmt.client_of(BOB).await;

    // bob's Machine on dc1: its VM on the remote cluster, running.
    let mut web = object(
        "Machine",
        "web",
        json!({"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}),
    );
    web.metadata.annotations = Some([("vitistack.io/kubevirt-config".into(), "dc1".into())].into());
    as_bob(&access::machines(&bob, NS), &web, &op).await;
    let far_vms: Api<VirtualMachine> = Api::namespaced(far.clone(), NS);
    let vm = eventually("web's VM on dc1", &op, || async {
        let vm = far_vms.get_opt("web").await.ok().flatten()?;
        (claims_of(&vm) == ["web-root", "web-data"]).then_some(vm)
    })
    .await;
    kubevirt::vmi(&far, NS, "web", json!({"phase": "Running"})).await;

    // bob's snapshot: the VirtualMachineSnapshot on dc1, none here.
    let snap = object(
        "MachineSnapshot",
        "web-before",
        json!({"machineName": "web"}),
    );
    as_bob(&dynamic::<MachineSnapshot>(&bob), &snap, &op).await;
    let far_vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(far.clone(), NS);
    let msnaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let seen = std::sync::Mutex::new(String::new());
    let vmsnap = eventually_with(
        WAIT,
        "the VirtualMachineSnapshot on dc1",
        || format!("{}\n{}", seen.lock().expect("seen"), op.log_tail(80)),
        || async {
            let s = msnaps.get_opt("web-before").await.ok().flatten();
            *seen.lock().expect("seen") = format!("the MachineSnapshot: {s:?}");
            far_vmsnaps.get_opt("web-before").await.ok().flatten()
        },
    )
    .await;
    assert_eq!(vmsnap.spec.source.name, "web");
    assert!(vmsnap.owner_references().is_empty(), "{vmsnap:?}");
    assert!(vmsnap.annotations().contains_key("vitistack.io/taken-of"));
    let near_vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(admin.clone(), NS);
    assert!(
        near_vmsnaps
            .get_opt("web-before")
            .await
            .expect("get")
            .is_none()
    );
    kubevirt_took(&far, "web-before", &vm).await;
    let taken = eventually("web-before ready", &op, || async {
        let s = msnaps.get("web-before").await.ok()?;
        (s.status.as_ref()?.ready_to_use == Some(true)).then_some(s)
    })
    .await;
    let status = taken.status.clone().unwrap_or_default();
    assert_eq!(status.cluster.as_deref(), Some("dc1"));
    assert!(status.cluster_identity.is_some());
    let machine_uid = eventually("web's uid", &op, || async {
        let m = access::machines(&admin, NS).get("web").await.ok()?;
        m.uid()
    })
    .await;
    assert_eq!(status.machine_uid.as_deref(), Some(machine_uid.as_str()));
    assert!(
        taken
            .finalizers()
            .iter()
            .any(|f| f == REMOTE_SNAPSHOT_FINALIZER)
    );

    // bob's restore: the VM stopped on dc1, KubeVirt restores there, the disks made again there.
    let undo = object(
        "MachineRestore",
        "undo",
        json!({"machineName": "web", "snapshotName": "web-before"}),
    );
    as_bob(&dynamic::<MachineRestore>(&bob), &undo, &op).await;
    let mrestores: Api<MachineRestore> = Api::namespaced(admin.clone(), NS);
    eventually("the VM on dc1 halted for the restore", &op, || async {
        let vm = far_vms.get("web").await.ok()?;
        (vm.spec.run_strategy.as_deref() == Some("Halted")).then_some(())
    })
    .await;
    let far_vmis: Api<VirtualMachineInstance> = Api::namespaced(far.clone(), NS);
    far_vmis
        .delete("web", &DeleteParams::default())
        .await
        .expect("VMI gone");
    let far_pvcs: Api<PersistentVolumeClaim> = Api::namespaced(far.clone(), NS);
    let old_root = far_pvcs.get("web-root").await.expect("web-root");
    let (vmrestore, restored) = kubevirt_restores(&far, &op, "undo", &[]).await;
    assert!(vmrestore.owner_references().is_empty(), "{vmrestore:?}");
    assert!(vmrestore.annotations().contains_key(PROOF_ANNOTATION));
    let near_vmrestores: Api<VirtualMachineRestore> = Api::namespaced(admin.clone(), NS);
    assert!(
        near_vmrestores
            .get_opt("undo")
            .await
            .expect("get")
            .is_none()
    );
    kubevirt_completes(&far, "undo", &restored).await;
    eventually("undo Succeeded", &op, || async {
        let r = mrestores.get("undo").await.ok()?;
        (restore_phase(&r) == Some("Succeeded")).then_some(())
    })
    .await;
    let vm = eventually(
        "web's VM on dc1 running on its disks again",
        &op,
        || async {
            let vm = far_vms.get("web").await.ok()?;
            (claims_of(&vm) == ["web-root", "web-data"]
                && vm.spec.run_strategy.as_deref() == Some("Always"))
            .then_some(vm)
        },
    )
    .await;
    assert_eq!(vm.spec.run_strategy.as_deref(), Some("Always"));
    let root = far_pvcs.get("web-root").await.expect("web-root");
    assert_ne!(root.uid(), old_root.uid(), "web-root made again");
    assert!(root.owner_references().is_empty(), "{root:?}");
    assert!(root.annotations().contains_key(PROOF_ANNOTATION));
    let source = root.spec.as_ref().and_then(|s| s.data_source.as_ref());
    assert_eq!(
        source.map(|s| s.name.as_str()),
        Some(restored[0].1.as_str())
    );
    // Ended: its VirtualMachineRestore on dc1 goes (no garbage collector follows it there).
    eventually("the VirtualMachineRestore on dc1 deleted", &op, || async {
        let vmrestores: Api<VirtualMachineRestore> = Api::namespaced(far.clone(), NS);
        vmrestores
            .get_opt("undo")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    // dc1's kubeconfig broken: nothing is done there, and the snapshots say why.
    kubeconfig_secret(&admin, "garbage").await;
    let later = object(
        "MachineSnapshot",
        "web-later",
        json!({"machineName": "web"}),
    );
    as_bob(&dynamic::<MachineSnapshot>(&bob), &later, &op).await;
    let waiting = eventually("web-later waiting for dc1", &op, || async {
        let st = msnaps.get("web-later").await.ok()?.status?;
        (st.reason.as_deref() == Some("KubeconfigInvalid")).then_some(st)
    })
    .await;
    assert_eq!(waiting.phase.as_deref(), Some("Pending"));
    assert!(
        waiting
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("cluster dc1: ")),
        "{waiting:?}"
    );
    // The MachineSnapshot deleted meanwhile: its VirtualMachineSnapshot stays until dc1 is back.
    msnaps
        .delete("web-before", &DeleteParams::default())
        .await
        .expect("delete the MachineSnapshot");
    let held = eventually("web-before's deletion waiting for dc1", &op, || async {
        let st = msnaps.get("web-before").await.ok()?.status?;
        let error = st.error?;
        error.contains(REMOTE_SNAPSHOT_FINALIZER).then_some(error)
    })
    .await;
    assert!(held.contains("KubeconfigInvalid"), "{held}");
    assert!(
        far_vmsnaps
            .get_opt("web-before")
            .await
            .expect("get")
            .is_some()
    );
    assert!(
        far_vmsnaps
            .get_opt("web-later")
            .await
            .expect("get")
            .is_none()
    );

    // dc1 back: web-before's VirtualMachineSnapshot there goes with it, web-later is taken.
    kubeconfig_secret(&admin, &kubeconfig).await;
    eventually("the VirtualMachineSnapshot on dc1 deleted", &op, || async {
        far_vmsnaps
            .get_opt("web-before")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    eventually("web-later taken on dc1", &op, || async {
        far_vmsnaps.get_opt("web-later").await.ok().flatten()
    })
    .await;
    eventually("the MachineSnapshot gone", &op, || async {
        msnaps
            .get_opt("web-before")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
}
