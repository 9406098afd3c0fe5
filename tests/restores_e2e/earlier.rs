//! Issue 32: a snapshot of an earlier Machine of the same name (deleted by mistake, made again)
//! is restored into the new Machine only when the author asks (`spec.allowEarlierMachine`), with
//! the same access checks as any restore; the restore then binds to the new Machine's uid (its
//! `status.machineUid`, the reconciler's hold, the VM controlling the restored claims).

use crate::access::{denial, fixture, rule, wait_status};
use crate::snapshots::restore::{
    in_phase, kubevirt_completes, kubevirt_restores, stopped_for, undo,
};
use crate::snapshots::{
    NS, claims_of, dynamic, eventually, running_web, snapshot_of_web, still_up,
};
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::snapshots::MachineRestore;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_machines_snapshot_is_restored_into_the_new_machine_only_when_asked() {
    // Carol may restore web (update it, create restores); Dave may create restores only.
    let mut env = fixture(&[])
        .with_controller_manager()
        .user("carol", &[])
        .grant(
            NS,
            "carol",
            vec![
                rule("vitistack.io", "machinerestores", &["create"]),
                rule("vitistack.io", "machines", &["update"]),
            ],
        )
        .user("dave", &[])
        .grant(
            NS,
            "dave",
            vec![rule("vitistack.io", "machinerestores", &["create"])],
        )
        .start()
        .await;
    let (admin, mut op) = env.take_replica().await;
    let machines: Api<Machine> = Api::namespaced(admin.clone(), NS);
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let (vm, old_uid) = running_web(&admin, &op).await;
    snapshot_of_web(&admin, &op, "web-before", &vm).await;

    // web deleted by mistake, then made again (GitOps): a new uid, new empty disks.
    machines
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete web");
    eventually("web, its VM and disks gone", &op, || async {
        let gone = machines.get_opt("web").await.ok()?.is_none()
            && vms.get_opt("web").await.ok()?.is_none()
            && pvcs.get_opt("web-root").await.ok()?.is_none()
            && pvcs.get_opt("web-data").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    let (_, new_uid) = running_web(&admin, &op).await;
    assert_ne!(new_uid, old_uid);
    let fresh_root = pvcs.get("web-root").await.expect("web-root");
    wait_status(&admin, NS, "web", &op, "web-before listed apart", |s| {
        (s.snapshots.iter()).any(|r| r.name == "web-before" && r.earlier_machine)
    })
    .await;

    let as_carol = dynamic::<MachineRestore>(&env.client_of("carol").await);
    let as_dave = dynamic::<MachineRestore>(&env.client_of("dave").await);
    // Not asked for: refused, naming the field to set.
    let message = match as_carol
        .create(&PostParams::default(), &undo("undo", "web-before"))
        .await
    {
        Err(kube::Error::Api(e)) => e.message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(
        message.contains("earlier Machine named web")
            && message.contains("spec.allowEarlierMachine: true"),
        "{message}"
    );
    let mut asked = undo("undo", "web-before");
    asked.data["spec"]["allowEarlierMachine"] = json!(true);
    // Asked for by someone who may not update web: refused as any restore.
    let message = denial(as_dave.create(&PostParams::default(), &asked).await);
    assert!(
        message
            .contains(r#"user "dave" cannot update machines.vitistack.io in namespace "team-a""#),
        "{message}"
    );
    // Asked for by Carol: the earlier Machine's disks restored into the new one.
    as_carol
        .create(&PostParams::default(), &asked)
        .await
        .expect("admitted");
    stopped_for(&admin, &op, "undo").await;
    let pinned = in_phase(&admin, &op, "undo", "Restoring").await;
    assert_eq!(
        pinned.status.and_then(|s| s.machine_uid),
        Some(new_uid.clone()),
        "pinned to the Machine restored into, not the snapshot's"
    );
    // The reconciler's hold binds to that uid too: the new Machine is held (Restoring).
    wait_status(&admin, NS, "web", &op, "the new Machine held", |s| {
        (s.conditions.iter())
            .any(|c| c.type_ == "Restoring" && c.status == "True" && c.message.contains("undo"))
    })
    .await;
    // KubeVirt makes the restored claims controlled by the new VM: proven by its uid.
    let (_, restored) = kubevirt_restores(&admin, &op, "undo", &[]).await;
    kubevirt_completes(&admin, "undo", &restored).await;
    let done = in_phase(&admin, &op, "undo", "Succeeded").await;
    assert_eq!(
        done.status.and_then(|s| s.machine_uid),
        Some(new_uid.clone())
    );
    let vm = vms.get("web").await.expect("VM");
    assert_eq!(claims_of(&vm), ["web-root", "web-data"]);
    for (disk, from) in &restored {
        let claim = pvcs.get(&format!("web-{disk}")).await.expect("claim");
        let owner = &claim.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(owner.uid, new_uid, "{disk}: the new Machine's");
        let source = (claim.spec.as_ref()).and_then(|s| s.data_source.as_ref());
        assert_eq!(
            source.map(|s| s.name.as_str()),
            Some(from.as_str()),
            "{disk}"
        );
    }
    let root = pvcs.get("web-root").await.expect("web-root");
    assert_ne!(root.uid(), fresh_root.uid(), "the new empty disk replaced");
    still_up(&mut op);
}
