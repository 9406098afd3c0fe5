//! Issue 19, node maintenance end to end on a real control plane with `kubevirt-operator run`
//! (webhooks registered, reconciler leading), playing CDI (a StorageProfile saying
//! ReadWriteMany/Block for one class) and KubeVirt (a VMI that is not live-migratable, then one
//! migrating from n1 to n2): placement and eviction strategy reach the VM, disk modes follow the
//! profile, bad placement is refused naming the field, a LiveMigrate Machine with a
//! ReadWriteOnce disk is admitted with the warning kubectl prints, and the Machine's
//! `LiveMigratable`, `status.migration`, node and Events follow the VMI.

mod access;
mod kubevirt;
mod support;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};

use access::machine_object as machine;
use access::{WAIT, first_denial, fixture, machines};
use kubevirt_operator::api::MachineStatus;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

const NS: &str = "team-a";

/// The webhook's refusal message, whatever its code.
fn refusal<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Api(e)) => e.message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Plays CDI: a StorageClass and the StorageProfile CDI computes for it.
async fn storage(admin: &Client, class: &str, profile: Option<Value>) {
    let sc: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class}, "provisioner": "example.com/none"
    }))
    .expect("StorageClass");
    Api::<StorageClass>::all(admin.clone())
        .create(&PostParams::default(), &sc)
        .await
        .expect("StorageClass");
    let Some(sets) = profile else { return };
    let ar = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "StorageProfile"),
        "storageprofiles",
    );
    let profiles = Api::<DynamicObject>::all_with(admin.clone(), &ar);
    let sp: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "StorageProfile",
        "metadata": {"name": class}, "spec": {}
    }))
    .expect("StorageProfile");
    profiles
        .create(&PostParams::default(), &sp)
        .await
        .expect("StorageProfile");
    let status = json!({"status": {"storageClass": class, "claimPropertySets": sets}});
    profiles
        .patch_status(class, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("StorageProfile status");
}

fn condition<'a>(s: &'a MachineStatus, type_: &str) -> Option<(&'a str, &'a str)> {
    let c = s.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.as_str(), c.reason.as_str()))
}

async fn reasons(admin: &Client) -> Vec<String> {
    let events = support::events_about(admin, NS, "mover").await;
    events.into_iter().map(|(_, reason, _)| reason).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_survive_node_maintenance() {
    let env = fixture(&[]).start().await;
    let (admin, op) = (env.admin_client().await, env.replica());
    storage(
        &admin,
        "rwx-block",
        Some(
            json!([{"accessModes": ["ReadWriteMany"], "volumeMode": "Block"},
                    {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}]),
        ),
    )
    .await;
    storage(&admin, "plain", None).await;

    // 1. Bad placement is refused naming the field.
    let bad = machine(
        "bad",
        json!({"template": "small", "placement": {"tolerations": [{"key": "k", "operator": "Maybe"}]}}),
    );
    let message = first_denial(&machines(&admin, NS), &PostParams::default(), &bad, op).await;
    assert!(
        message.contains("spec.placement.tolerations[0].operator"),
        "{message}"
    );
    let bad = machine(
        "bad",
        json!({"template": "small", "placement": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["many"]}]}]}}}}}),
    );
    let message = refusal(
        machines(&admin, NS)
            .create(&PostParams::default(), &bad)
            .await,
    );
    assert!(
        message.contains("spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values"),
        "{message}"
    );

    // 2. LiveMigrate with a ReadWriteOnce disk: admitted, with the warning kubectl prints.
    let manifest = env.dir().join("stuck.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: stuck}\n\
         spec: {template: small, evictionStrategy: LiveMigrate, disks: [{name: root, accessMode: ReadWriteOnce}]}\n",
    )
    .expect("manifest");
    let out = env
        .kubectl()
        .expect("kubectl")
        .args(["apply", "-n", NS, "-f"])
        .arg(&manifest)
        .output()
        .expect("kubectl apply");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning:") && stderr.contains(r#"disk "root" is ReadWriteOnce"#),
        "{stderr}"
    );

    // 3. Placement and eviction strategy on the VM; disk modes from the profile.
    let mover = machine(
        "mover",
        json!({"template": "small", "evictionStrategy": "LiveMigrate",
               "placement": {
                   "nodeSelector": {"node-role.kubernetes.io/worker": ""},
                   "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "vms", "effect": "NoSchedule"}],
                   "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                       {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "db"}}}}]}},
                   "priorityClassName": "vm-high"},
               "disks": [{"name": "root", "storageClass": "rwx-block"},
                         {"name": "data", "size": "1Gi", "storageClass": "plain"}]}),
    );
    machines(&admin, NS)
        .create(&PostParams::default(), &mover)
        .await
        .expect("mover");
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let vm = support::eventually_with(
        WAIT,
        "the VM",
        || op.log_tail(40),
        || async { vms.get_opt("mover").await.ok().flatten() },
    )
    .await;
    let template = serde_json::to_value(&vm.spec.template.spec).expect("VM template");
    assert_eq!(template["evictionStrategy"], "LiveMigrate");
    assert_eq!(
        template["nodeSelector"],
        json!({"node-role.kubernetes.io/worker": ""})
    );
    assert_eq!(template["tolerations"][0]["key"], "dedicated");
    assert_eq!(
        template["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            [0]["weight"],
        100
    );
    assert_eq!(template["priorityClassName"], "vm-high");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let modes = |c: PersistentVolumeClaim| {
        let spec = c.spec.expect("claim spec");
        (
            spec.access_modes.unwrap_or_default(),
            spec.volume_mode.unwrap_or_default(),
        )
    };
    let root = claims.get("mover-root").await.expect("mover-root");
    assert_eq!(
        modes(root),
        (vec!["ReadWriteMany".to_owned()], "Block".to_owned())
    );
    let data = claims.get("mover-data").await.expect("mover-data");
    assert_eq!(
        modes(data),
        (vec!["ReadWriteOnce".to_owned()], "Filesystem".to_owned()),
        "no profile for the class: the modes of before"
    );
    let s = access::wait_status(&admin, NS, "mover", op, "the disks' modes", |s| {
        s.disks.len() == 2
    })
    .await;
    let root = s
        .disks
        .iter()
        .find(|d| d.name == "root")
        .expect("root's status");
    assert_eq!(
        (root.access_mode.as_deref(), root.volume_mode.as_deref()),
        (Some("ReadWriteMany"), Some("Block"))
    );

    // 4. KubeVirt says the VMI cannot move: the Machine says so, with KubeVirt's words.
    let not_migratable = json!({"type": "LiveMigratable", "status": "False",
        "reason": "DisksNotLiveMigratable", "message": "cannot migrate VMI: PVC mover-data is not shared"});
    kubevirt::vmi(
        &admin,
        NS,
        "mover",
        json!({"phase": "Running", "nodeName": "n1",
        "conditions": [not_migratable]}),
    )
    .await;
    let s = access::wait_status(&admin, NS, "mover", op, "LiveMigratable False", |s| {
        condition(s, "LiveMigratable") == Some(("False", "DisksNotLiveMigratable"))
    })
    .await;
    assert_eq!(s.node_name.as_deref(), Some("n1"));
    assert_eq!(s.migration, None);

    // 5. A migration from n1 to n2, then its end.
    let migratable = json!({"type": "LiveMigratable", "status": "True"});
    let state = json!({"migrationUid": "m1", "sourceNode": "n1", "targetNode": "n2",
                       "startTimestamp": "2026-11-25T10:00:00Z"});
    kubevirt::vmi(
        &admin,
        NS,
        "mover",
        json!({"phase": "Running", "nodeName": "n1",
        "conditions": [migratable], "migrationState": state}),
    )
    .await;
    let s = access::wait_status(&admin, NS, "mover", op, "the migration running", |s| {
        s.migration.as_ref().and_then(|m| m.phase.as_deref()) == Some("Running")
    })
    .await;
    let m = s.migration.clone().expect("migration");
    assert_eq!(
        (m.source_node.as_deref(), m.target_node.as_deref()),
        (Some("n1"), Some("n2"))
    );
    assert_eq!(
        condition(&s, "LiveMigratable"),
        Some(("True", "LiveMigratable"))
    );
    let mut done = state.clone();
    done["completed"] = json!(true);
    done["endTimestamp"] = json!("2026-11-25T10:00:42Z");
    kubevirt::vmi(
        &admin,
        NS,
        "mover",
        json!({"phase": "Running", "nodeName": "n2",
        "conditions": [migratable], "migrationState": done}),
    )
    .await;
    let s = access::wait_status(&admin, NS, "mover", op, "the migration done, on n2", |s| {
        s.migration.as_ref().and_then(|m| m.phase.as_deref()) == Some("Succeeded")
            && s.node_name.as_deref() == Some("n2")
    })
    .await;
    assert!(s.migration.and_then(|m| m.ended_at).is_some());
    let seen = support::eventually(WAIT, "the migration's Events", || async {
        let r = reasons(&admin).await;
        let both = ["MigrationStarted", "MigrationSucceeded"]
            .iter()
            .all(|want| r.iter().any(|have| have == want));
        both.then_some(r)
    })
    .await;
    assert_eq!(
        seen.iter().filter(|r| *r == "MigrationStarted").count(),
        1,
        "once: {seen:?}"
    );
}
