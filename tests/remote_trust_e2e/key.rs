//! A lost ownership key Secret is never replaced silently; `--new-ownership-key` re-proves.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::{OWNERSHIP_KEY_SECRET, PROOF_ANNOTATION};
use serde_json::json;

use crate::access::{create_admitted, machines};
use crate::support;
use crate::{NS, OP_NS, condition, on_dc1, start, status_when, until, vm, world};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_ownership_key_is_never_replaced_silently() {
    let w = world().await;
    let mut op = start(&w.mgmt, &[]).await;
    for name in ["kept", "gone"] {
        create_admitted(
            &machines(&w.alice, NS),
            &on_dc1(name, json!({"template": "small"})),
            &op,
        )
        .await;
    }
    let old_vm = until(&op, "kept's VM on the remote", || vm(&w.far_admin, "kept")).await;
    until(&op, "gone's VM on the remote", || vm(&w.far_admin, "gone")).await;
    status_when(&w.admin, &op, "kept", "kept is placed", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "True")
    })
    .await;

    // The key Secret is lost (a backup restored without Secrets), and the operator restarted.
    op.kill();
    let secrets = Api::<Secret>::namespaced(w.admin.clone(), OP_NS);
    secrets
        .delete(OWNERSHIP_KEY_SECRET, &DeleteParams::default())
        .await
        .expect("delete the key");
    let mut op = start(&w.mgmt, &[]).await;
    let refusal = until(&op, "the leader refuses, naming the Secret", || async {
        let log = op.log_tail(200);
        log.contains(&format!("{OP_NS}/{OWNERSHIP_KEY_SECRET} is missing"))
            .then_some(log)
    })
    .await;
    assert!(
        refusal.contains("--new-ownership-key") && refusal.contains("VirtualMachine team-a/"),
        "{refusal}"
    );
    assert!(
        secrets
            .get_opt(OWNERSHIP_KEY_SECRET)
            .await
            .expect("read")
            .is_none(),
        "no new key made silently"
    );
    // A Machine deleted meanwhile keeps its finalizer: its VM is still there.
    let refusals = |op: &support::Proc| op.log_tail(2000).matches("is missing").count();
    let before = refusals(&op);
    let api: Api<Machine> = Api::namespaced(w.alice.clone(), NS);
    api.delete("gone", &DeleteParams::default())
        .await
        .expect("alice deletes gone");
    until(&op, "the refusal repeated after the deletion", || async {
        (refusals(&op) > before).then_some(())
    })
    .await;
    assert!(
        api.get_opt("gone").await.expect("read").is_some(),
        "gone waits"
    );
    assert!(
        vm(&w.far_admin, "gone").await.is_some(),
        "gone's VM is not orphaned"
    );
    op.kill();

    // The admin accepts a new key: the remote objects are re-proven, an Event each.
    let op = start(&w.mgmt, &["--new-ownership-key"]).await;
    let reproven = until(&op, "kept's VM re-proven", || async {
        let vm = vm(&w.far_admin, "kept").await?;
        let proof = vm.annotations().get(PROOF_ANNOTATION)?.clone();
        (Some(&proof) != old_vm.annotations().get(PROOF_ANNOTATION)).then_some(vm)
    })
    .await;
    assert_eq!(reproven.uid(), old_vm.uid(), "the very VM, not a new one");
    until(&op, "an Event on kept", || async {
        let events = support::events_about(&w.admin, NS, "kept").await;
        events
            .iter()
            .any(|(_, reason, note)| {
                reason == "OwnershipReproven" && note.contains("VirtualMachine kept")
            })
            .then_some(())
    })
    .await;
    let key = secrets
        .get(OWNERSHIP_KEY_SECRET)
        .await
        .expect("the new key");
    assert!(
        key.annotations()
            .contains_key("vitistack.io/replaces-lost-key")
    );
    let s = status_when(&w.admin, &op, "kept", "kept is placed again", |s| {
        condition(s, "ClusterReady").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert!(
        !s.conditions.iter().any(|c| c.reason.ends_with("Conflict")),
        "{:?}",
        s.conditions
    );
    // gone's deletion finishes: its VM deleted there, then the Machine.
    until(&op, "gone's VM deleted there", || async {
        vm(&w.far_admin, "gone").await.is_none().then_some(())
    })
    .await;
    until(&op, "gone goes", || async {
        api.get_opt("gone").await.ok()?.is_none().then_some(())
    })
    .await;
    drop(w.remote);
}
