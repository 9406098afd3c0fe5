//! Claims: never shared between colliding names, others' left alone, retained ones re-adopted.

use crate::operator::RESYNC;
use crate::ownership::*;
#[allow(unused_imports)]
use crate::*;
use kube::api::{DeleteParams, PropagationPolicy};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colliding_claim_names_are_never_shared() {
    let env = env("collide").await;
    // `a` + disk `b-root` and `a-b` + disk `root` both want claim `a-b-root`.
    let a = env
        .machine(
            "a",
            json!({"template": "small", "disks": [{"name": "b-root", "size": "1Gi"}]}),
        )
        .await;
    let claim = env
        .until("claim a-b-root controlled by Machine a", || async {
            let pvc = env.get(&pvc_ar(), "a-b-root").await?;
            (controller_uid(&pvc) == Some(uid(&a))).then_some(pvc)
        })
        .await;
    env.wait_for(&vm_ar(), "a").await;

    let a_b = env.machine("a-b", json!({"template": "small"})).await;
    let message = env
        .wait_condition("a-b", "StorageReady", "False", "ClaimConflict")
        .await;
    assert!(message.contains("a-b-root"), "{message}");
    let (type_, note) = env.wait_event("a-b", "ClaimConflict").await;
    assert_eq!(type_, "Warning");
    assert!(note.contains("a-b-root"), "{note}");

    stays(
        &env,
        "a-b's VM must not mount a-b-root, which Machine a controls",
        RESYNC * 2,
        async || {
            let vm = env.get(&vm_ar(), "a-b").await;
            vm.is_none_or(|vm| !mounted_claims(&vm).contains(&"a-b-root".to_owned()))
        },
    )
    .await;
    let after = env.get(&pvc_ar(), "a-b-root").await.expect("the claim");
    assert_eq!(controller_uid(&after), Some(uid(&a)));
    assert!(
        !owner_uids(&after).contains(&uid(&a_b)),
        "{:?}",
        after["metadata"]
    );
    assert_eq!(label(&after, MACHINE_LABEL), Some("a"));
    assert_eq!(after["spec"], claim["spec"]);
    let vm_a = env.get(&vm_ar(), "a").await.expect("a's VM");
    assert!(mounted_claims(&vm_a).contains(&"a-b-root".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_the_operator_did_not_make_are_left_alone() {
    let env = env("foreign").await;
    env.network_configuration("foreign-net", "br7", 7).await;
    // Made by someone else, with the names three Machines want: unlabelled, unowned.
    let vm = env
        .create(
            &vm_ar(),
            json!({"metadata": {"name": "vm-taken"}, "spec": {"runStrategy": "Halted",
                "template": {"spec": {"domain": {"memory": {"guest": "1Gi"}, "devices": {}}}}}}),
        )
        .await;
    let pvc = env
        .create(
            &pvc_ar(),
            json!({"metadata": {"name": "pvc-taken-root"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                "resources": {"requests": {"storage": "20Gi"}}}}),
        )
        .await;
    let nad = env
        .create(
            &nad_ar(),
            json!({"metadata": {"name": "foreign-net"}, "spec": {"config":
                r#"{"cniVersion":"0.3.1","type":"bridge","bridge":"br-someone-else"}"#}}),
        )
        .await;
    let foreign = [
        (vm_ar(), "vm-taken", vm),
        (pvc_ar(), "pvc-taken-root", pvc),
        (nad_ar(), "foreign-net", nad),
    ];

    env.machine("vm-taken", json!({"template": "small"})).await;
    env.machine("pvc-taken", json!({"template": "small"})).await;
    env.machine(
        "nad-taken",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "foreign-net"}]}),
    )
    .await;
    for (machine, type_, reason, object) in [
        (
            "vm-taken",
            "VirtualMachineReady",
            "VirtualMachineConflict",
            "vm-taken",
        ),
        (
            "pvc-taken",
            "StorageReady",
            "ClaimConflict",
            "pvc-taken-root",
        ),
        (
            "nad-taken",
            "NetworkReady",
            "NetworkAttachmentConflict",
            "foreign-net",
        ),
    ] {
        let message = env.wait_condition(machine, type_, "False", reason).await;
        assert!(message.contains(object), "{machine}: {message}");
        let (event_type, note) = env.wait_event(machine, reason).await;
        assert_eq!(event_type, "Warning", "{machine}");
        assert!(note.contains(object), "{machine}: {note}");
    }

    let unchanged = async || {
        for (ar, name, before) in &foreign {
            let now = env.get(ar, name).await;
            assert_eq!(
                now.as_ref(),
                Some(before),
                "{} {name} was changed or deleted\n{}",
                ar.kind,
                env.log()
            );
        }
        // The VM would mount a claim or attachment that is not its Machine's.
        for machine in ["pvc-taken", "nad-taken"] {
            assert!(env.get(&vm_ar(), machine).await.is_none(), "VM {machine}");
        }
        true
    };
    stays(&env, "foreign objects unchanged", RESYNC * 2, &unchanged).await;

    for machine in ["vm-taken", "pvc-taken", "nad-taken"] {
        env.delete(&machine_ar(), machine, &DeleteParams::default())
            .await;
    }
    for machine in ["vm-taken", "pvc-taken", "nad-taken"] {
        env.wait_gone(&machine_ar(), machine).await;
    }
    // Give the garbage collector time to act on any owner reference the operator left.
    stays(&env, "foreign objects survive", RESYNC * 2, async || {
        for (ar, name, before) in &foreign {
            let now = env.get(ar, name).await;
            assert_eq!(now.as_ref(), Some(before), "{} {name}", ar.kind);
        }
        true
    })
    .await;
}

/// A retain-disks Machine deleted with `policy`: both claims survive, released; a Machine of
/// the same name then re-adopts the very same claims and mounts them.
async fn retained_claims_survive(prefix: &str, policy: PropagationPolicy) {
    let env = env(prefix).await;
    let spec = json!({"template": "small", "disks": [{"name": "data", "size": "1Gi"}]});
    let old = env
        .create(
            &machine_ar(),
            json!({"metadata": {"name": "keeper", "annotations": {RETAIN_DISKS: "true"}},
                   "spec": spec}),
        )
        .await;
    let claims = ["keeper-root", "keeper-data"];
    env.wait_for(&vm_ar(), "keeper").await;
    let mut claim_uids = Vec::new();
    for claim in claims {
        claim_uids.push(uid(&env.wait_for(&pvc_ar(), claim).await));
    }

    env.delete(&machine_ar(), "keeper", &delete_with(policy))
        .await;
    env.wait_gone(&machine_ar(), "keeper").await;
    env.wait_gone(&vm_ar(), "keeper").await;
    let released = async || {
        for claim in claims {
            let Some(pvc) = env.get(&pvc_ar(), claim).await else {
                panic!("claim {claim} was deleted\n{}", env.log());
            };
            let m = &pvc["metadata"];
            assert!(m.get("deletionTimestamp").is_none(), "{claim}: {m}");
            assert_eq!(controller_uid(&pvc), None, "{claim}: {m}");
            assert!(!owner_uids(&pvc).contains(&uid(&old)), "{claim}: {m}");
            assert_eq!(label(&pvc, MANAGED_BY_LABEL), Some(MANAGED_BY), "{m}");
            assert_eq!(label(&pvc, MACHINE_LABEL), Some("keeper"), "{m}");
        }
        true
    };
    // Long enough for the garbage collector to act on anything it may act on.
    stays(&env, "released claims stay", RESYNC * 2, &released).await;

    let new = env.machine("keeper", spec).await;
    env.until("the new Machine to re-adopt both claims", || async {
        for (claim, claim_uid) in claims.iter().zip(&claim_uids) {
            let pvc = env.get(&pvc_ar(), claim).await?;
            if controller_uid(&pvc) != Some(uid(&new)) || uid(&pvc) != *claim_uid {
                return None;
            }
        }
        Some(())
    })
    .await;
    // Each adoption is announced, naming the claim.
    let (type_, note) = env.wait_event("keeper", "Adopted").await;
    assert_eq!(type_, "Normal");
    assert!(note.contains("keeper-"), "{note}");
    env.until("the new VM to mount both claims", || async {
        let vm = env.get(&vm_ar(), "keeper").await?;
        let mounted = mounted_claims(&vm);
        claims
            .iter()
            .all(|c| mounted.contains(&c.to_string()))
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retained_claims_survive_foreground_deletion() {
    retained_claims_survive("retain-foreground", PropagationPolicy::Foreground).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retained_claims_survive_background_deletion() {
    retained_claims_survive("retain-background", PropagationPolicy::Background).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retained_claims_survive_orphan_deletion() {
    retained_claims_survive("retain-orphan", PropagationPolicy::Orphan).await;
}
