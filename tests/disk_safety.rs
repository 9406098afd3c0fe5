//! Issue 18 on the real control plane, with Kubernetes' garbage collector running: disks no one
//! else can take, lose or freeze. The `kubevirt-operator run` binary holds exactly
//! `manifests/rbac/`; the tests play the tenant (planting and forging objects with the admin's
//! rights, which are a superset of a tenant's), CDI (the claims it fills) and the volume
//! controller. No webhook runs here: these are the reconciler's own guarantees, for Machines
//! that reach it however they were admitted (the author's access check at admission is tested
//! in tests/access_e2e.rs).

mod cdi;
mod operator;
mod ownership;
mod support;

use kube::api::{DeleteParams, Patch, PatchParams, PropagationPolicy};
use serde_json::{Value, json};

use cdi::{IMAGE, dv_ar};
use kubevirt_operator::api::names::OWNERSHIP_KEY_SECRET;
use operator::RESYNC;
use ownership::*;
use support::OPERATOR_NAMESPACE;

const PROOF: &str = "vitistack.io/made-for";

async fn env(prefix: &str) -> Env {
    let env = shared_env("disk-safety", prefix).await;
    // Objects older than the ownership key are judged by the second edition's rules (an
    // upgrade): everything planted here must come after it.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    support::eventually(
        std::time::Duration::from_secs(60),
        "the ownership key",
        || async { secrets.get_opt(OWNERSHIP_KEY_SECRET).await.ok().flatten() },
    )
    .await;
    env
}

async fn merge(env: &Env, name: &str, patch: Value) {
    env.api(&machine_ar())
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap_or_else(|e| panic!("patch Machine {name}: {e}"));
}

/// A claim as a tenant would plant it, with `metadata` merged in (labels, owner references).
async fn plant_claim(env: &Env, name: &str, metadata: Value) -> Value {
    let mut meta = json!({"name": name});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), metadata.as_object()) {
        m.extend(extra.clone());
    }
    env.create(
        &pvc_ar(),
        json!({"metadata": meta, "spec": {"accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem", "resources": {"requests": {"storage": "20Gi"}}}}),
    )
    .await
}

/// The parts of a claim the operator must never change: spec, labels, owners, annotations.
fn essence(claim: &Value) -> Value {
    let m = &claim["metadata"];
    json!([
        claim["spec"],
        m["labels"],
        m["ownerReferences"],
        m["annotations"],
        m["uid"]
    ])
}

/// The claim stays exactly as planted, and no VM of `machine` mounts it, for two resyncs.
async fn untouched_and_unmounted(env: &Env, claim: &str, machine: &str, planted: &Value) {
    stays(
        env,
        &format!("{claim}: unchanged and not mounted by {machine}"),
        RESYNC * 2,
        async || {
            let now = env.get(&pvc_ar(), claim).await;
            let vm = env.get(&vm_ar(), machine).await;
            now.is_some_and(|c| essence(&c) == essence(planted))
                && vm.is_none_or(|vm| !mounted_claims(&vm).contains(&claim.to_owned()))
        },
    )
    .await;
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_with_forged_labels_is_a_conflict_never_mounted_changed_or_deleted() {
    let env = env("forged-labels").await;
    // Our labels, no owner: what a released claim looked like to the second edition.
    let planted = plant_claim(
        &env,
        "lab-root",
        json!({"labels": {MANAGED_BY_LABEL: MANAGED_BY, MACHINE_LABEL: "lab"}}),
    )
    .await;
    env.machine("lab", json!({"template": "small"})).await;
    let message = env
        .wait_condition("lab", "StorageReady", "False", "ClaimConflict")
        .await;
    assert!(message.contains("lab-root"), "{message}");
    untouched_and_unmounted(&env, "lab-root", "lab", &planted).await;

    env.delete(&machine_ar(), "lab", &DeleteParams::default())
        .await;
    env.wait_gone(&machine_ar(), "lab").await;
    stays(&env, "the planted claim survives", RESYNC * 2, async || {
        env.get(&pvc_ar(), "lab-root")
            .await
            .is_some_and(|c| essence(&c) == essence(&planted))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_with_a_forged_controller_reference_is_a_conflict_never_mounted_or_changed() {
    let env = env("forged-owner").await;
    let machine = env.machine("own", json!({"template": "small"})).await;
    env.wait_for(&vm_ar(), "own").await;
    // The Machine's uid is public (`get machines`): a controller reference to it, and our
    // labels, on a claim for a disk the Machine is about to get.
    let planted = plant_claim(
        &env,
        "own-data",
        json!({"labels": {MANAGED_BY_LABEL: MANAGED_BY, MACHINE_LABEL: "own"},
               "ownerReferences": [{"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                   "name": "own", "uid": uid(&machine), "controller": true}]}),
    )
    .await;
    merge(
        &env,
        "own",
        json!({"spec": {"disks": [{"name": "data", "size": "20Gi"}]}}),
    )
    .await;
    let message = env
        .wait_condition("own", "StorageReady", "False", "ClaimConflict")
        .await;
    assert!(message.contains("own-data"), "{message}");
    untouched_and_unmounted(&env, "own-data", "own", &planted).await;
    // Its own claim, made by the operator, carries the proof; the planted one none.
    let root = env.get(&pvc_ar(), "own-root").await.expect("own-root");
    assert!(
        root.pointer(&format!(
            "/metadata/annotations/{}",
            PROOF.replace('/', "~1")
        ))
        .is_some(),
        "{root}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_claim_whose_adoption_fails_survives_the_new_machines_deletion() {
    let env = env("failed-adoption").await;
    env.create(
        &machine_ar(),
        json!({"metadata": {"name": "db", "annotations": {RETAIN_DISKS: "true"}},
               "spec": {"template": "large"}}),
    )
    .await;
    env.wait_for(&vm_ar(), "db").await;
    let retained = env.wait_for(&pvc_ar(), "db-root").await;
    env.delete(&machine_ar(), "db", &DeleteParams::default())
        .await;
    env.wait_gone(&machine_ar(), "db").await;

    // Recreated smaller: adopting would shrink the claim, which the API server refuses.
    env.machine("db", json!({"template": "small"})).await;
    env.until("the adoption to fail on the claim", || async {
        let m = env.get(&machine_ar(), "db").await?;
        let (status, reason, message) = condition(&m, "StorageReady")?;
        (status == "False" && reason != "ClaimConflict" && message.contains("db-root"))
            .then_some(())
    })
    .await;
    assert!(
        env.get(&vm_ar(), "db")
            .await
            .is_none_or(|vm| !mounted_claims(&vm).contains(&"db-root".into())),
        "a claim it could not adopt is not mounted"
    );

    env.delete(&machine_ar(), "db", &DeleteParams::default())
        .await;
    env.wait_gone(&machine_ar(), "db").await;
    stays(
        &env,
        "the retained claim survives",
        RESYNC * 2,
        async || {
            env.get(&pvc_ar(), "db-root").await.is_some_and(|c| {
                uid(&c) == uid(&retained)
                    && c["metadata"].get("deletionTimestamp").is_none()
                    && c["spec"] == retained["spec"]
            })
        },
    )
    .await;
}

/// A retain-disks Machine whose last claim write failed (a blank disk grown while its claim is
/// unbound: the API server refuses), deleted with `policy`: both claims survive.
async fn retain_holds_after_a_failed_write(prefix: &str, policy: PropagationPolicy) {
    let env = env(prefix).await;
    let disks = |size: &str| json!([{"name": "data", "size": size}]);
    env.machine(
        "keeper",
        json!({"template": "small", "disks": disks("1Gi")}),
    )
    .await;
    env.wait_for(&vm_ar(), "keeper").await;
    let claims = ["keeper-root", "keeper-data"];
    let mut uids = Vec::new();
    for claim in claims {
        let c = env.wait_for(&pvc_ar(), claim).await;
        assert!(controller_uid(&c).is_some(), "{claim} owned before retain");
        uids.push(uid(&c));
    }

    // retain-disks and a write the API server refuses, in one change.
    merge(
        &env,
        "keeper",
        json!({"metadata": {"annotations": {RETAIN_DISKS: "true"}},
               "spec": {"disks": disks("2Gi")}}),
    )
    .await;
    let message = env
        .wait_condition("keeper", "DisksRetained", "True", "DisksReleased")
        .await;
    assert!(!message.is_empty());
    for claim in claims {
        let c = env.get(&pvc_ar(), claim).await.expect("claim");
        assert!(owner_uids(&c).is_empty(), "{claim}: {}", c["metadata"]);
    }
    let m = env.get(&machine_ar(), "keeper").await.expect("Machine");
    let (status, _, message) = condition(&m, "StorageReady").expect("StorageReady");
    assert_eq!(status, "False", "the grown claim's write failed: {message}");

    env.delete(&machine_ar(), "keeper", &delete_with(policy))
        .await;
    env.wait_gone(&machine_ar(), "keeper").await;
    stays(&env, "both claims survive", RESYNC * 2, async || {
        let mut all = true;
        for (claim, claim_uid) in claims.iter().zip(&uids) {
            all &= env.get(&pvc_ar(), claim).await.is_some_and(|c| {
                uid(&c) == *claim_uid && c["metadata"].get("deletionTimestamp").is_none()
            });
        }
        all
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_disks_holds_under_foreground_deletion_after_a_failed_write() {
    retain_holds_after_a_failed_write("retain-fg", PropagationPolicy::Foreground).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_disks_holds_under_background_deletion_after_a_failed_write() {
    retain_holds_after_a_failed_write("retain-bg", PropagationPolicy::Background).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_disks_holds_under_orphan_deletion_after_a_failed_write() {
    retain_holds_after_a_failed_write("retain-orphan", PropagationPolicy::Orphan).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_keeps_the_disks_without_retain_disks() {
    let env = env("orphan").await;
    env.machine("plain", json!({"template": "small"})).await;
    env.wait_for(&vm_ar(), "plain").await;
    let root = env.wait_for(&pvc_ar(), "plain-root").await;
    env.delete(
        &machine_ar(),
        "plain",
        &delete_with(PropagationPolicy::Orphan),
    )
    .await;
    env.wait_gone(&machine_ar(), "plain").await;
    stays(&env, "the disk survives", RESYNC * 2, async || {
        env.get(&pvc_ar(), "plain-root")
            .await
            .is_some_and(|c| uid(&c) == uid(&root) && owner_uids(&c).is_empty())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_data_volume_is_made_over_a_foreign_claim() {
    let env = env("cdi-foreign-claim").await;
    let planted = plant_claim(&env, "img-root", json!({})).await;
    env.machine(
        "img",
        json!({"template": "small", "disks": [
            {"name": "root", "size": "20Gi", "source": {"http": {"url": IMAGE}}}]}),
    )
    .await;
    let message = env
        .wait_condition("img", "StorageReady", "False", "ClaimConflict")
        .await;
    assert!(message.contains("img-root"), "{message}");
    stays(&env, "no DataVolume img-root", RESYNC * 2, async || {
        env.get(&dv_ar(), "img-root").await.is_none()
    })
    .await;
    untouched_and_unmounted(&env, "img-root", "img", &planted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_volumes_never_let_cdi_adopt_or_collect() {
    let env = env("cdi-annotations").await;
    env.machine(
        "imp",
        json!({"template": "small", "disks": [
            {"name": "root", "size": "20Gi", "source": {"http": {"url": IMAGE}}}]}),
    )
    .await;
    let dv = env.wait_for(&dv_ar(), "imp-root").await;
    let annotations = &dv["metadata"]["annotations"];
    assert_eq!(
        annotations["cdi.kubevirt.io/storage.deleteAfterCompletion"], "false",
        "{annotations}"
    );
    assert_eq!(
        annotations["cdi.kubevirt.io/allowClaimAdoption"], "false",
        "{annotations}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grown_sourced_disk_does_not_wedge_the_machine() {
    let env = env("cdi-grow").await;
    let root =
        |size: &str| json!([{"name": "root", "size": size, "source": {"http": {"url": IMAGE}}}]);
    env.machine("grow", json!({"template": "small", "disks": root("20Gi")}))
        .await;
    let dv = env.wait_for(&dv_ar(), "grow-root").await;
    let vm = env.wait_for(&vm_ar(), "grow").await;
    assert_eq!(vm.pointer("/spec/runStrategy"), Some(&json!("Always")));
    // CDI's part: the claim it made for this DataVolume, bound; the import done.
    env.create(
        &pvc_ar(),
        json!({"metadata": {"name": "grow-root",
                "annotations": {"cdi.kubevirt.io/createdForDataVolume": uid(&dv)},
                "ownerReferences": [{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                    "name": "grow-root", "uid": uid(&dv), "controller": true,
                    "blockOwnerDeletion": true}]},
               "spec": {"accessModes": ["ReadWriteOnce"],
                   "resources": {"requests": {"storage": "20Gi"}}}}),
    )
    .await;
    cdi::cdi_status(
        &env,
        "grow-root",
        json!({"phase": "Succeeded", "progress": "100.0%"}),
    )
    .await;

    // Grown, and stopped, in one change.
    merge(
        &env,
        "grow",
        json!({"spec": {"running": false, "disks": root("30Gi")}}),
    )
    .await;
    env.until("running: false to reach the VM", || async {
        let vm = env.get(&vm_ar(), "grow").await?;
        (vm.pointer("/spec/runStrategy") == Some(&json!("Halted"))).then_some(())
    })
    .await;
    let after = env.get(&dv_ar(), "grow-root").await.expect("DataVolume");
    assert_eq!(
        after.pointer("/spec/storage/resources/requests/storage"),
        dv.pointer("/spec/storage/resources/requests/storage"),
        "CDI refuses any change of a DataVolume's spec: the claim grows instead"
    );
}
