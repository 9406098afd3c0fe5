//! MachineClasses end to end, on a dedicated control plane (the operator registers its webhooks
//! for the whole cluster): `kubevirt-operator run` with self-managed certificates, two replicas.
//! Built-ins work with no MachineClass at all; a new class is in force on every replica within
//! seconds, with no restart; unknown classes are refused listing the classes, overrides beyond a
//! class's limits naming the limit, a disabled class for new Machines only, a second default;
//! and editing or deleting a class leaves existing Machines and their VMs and claims as they are.

mod access;
mod machine_class;
mod support;

#[path = "machine_class/hardware.rs"]
mod hardware;

use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Error, ResourceExt};
use serde_json::{Value, json};

use access::{WAIT, first_denial, machines, start_follower, start_replica};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::Api;
use kubevirt_operator::api::names::CLASS_ANNOTATION;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use machine_class::*;
use support::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classes_are_in_force_on_every_replica_and_bound_new_machines() {
    let env = fixture().start().await;
    let admin = env.admin_client().await;
    let (a, port_a) = start_replica(&env, OP_NS, "replica-a", &[]).await;
    // The leader fills the configurations' caBundle: it must be the replica they call.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), OP_NS);
    eventually(WAIT, "replica-a holds the Lease", || async {
        let lease = leases.get_opt("kubevirt-operator-leader").await.ok()??;
        let holder = lease.spec?.holder_identity?;
        (holder == "replica-a").then_some(())
    })
    .await;
    let (b, port_b) = start_follower(&env, OP_NS, "replica-b", port_a);
    let api = machines(&admin, NS);

    // No MachineClass at all: the built-ins, and a refusal listing them.
    let denied = first_denial(
        &api,
        &PostParams::default(),
        &machine("huge", json!({"template": "huge"})),
        &a,
    )
    .await;
    assert!(
        denied.contains(r#"spec.template: Unsupported value: "huge": supported values: "large", "medium", "small""#),
        "{denied}"
    );
    let small = api
        .create(
            &PostParams::default(),
            &machine("small", json!({"template": "small"})),
        )
        .await
        .expect("small");
    let plain = api
        .create(&PostParams::default(), &machine("plain", json!({})))
        .await
        .expect("no template");
    assert_eq!((cores(&small), cores(&plain)), (Some(1), Some(2)));
    assert_eq!(plain.data["spec"]["template"], "medium");

    // A new class, through the MachineClass webhook: in force on both replicas within seconds.
    let client = replica_client(&admin).await;
    for port in [port_a, port_b] {
        eventually(WAIT, "the replica's webhook", || async {
            cores_on(&client, port, "small").await.ok()
        })
        .await;
    }
    let created = Instant::now();
    classes(&admin)
        .create(
            &PostParams::default(),
            &class("xlarge", xlarge(4, "48Gi", "100Gi")),
        )
        .await
        .expect("class");
    for port in [port_a, port_b] {
        eventually(
            Duration::from_secs(5),
            "xlarge on every replica",
            || async { (cores_on(&client, port, "xlarge").await == Ok(4)).then_some(()) },
        )
        .await;
    }
    let took = created.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");

    let unknown = |m: &str| m.contains(r#"Unsupported value: "xlarge""#);
    let db = create_when(&api, &machine("db", json!({"template": "xlarge"})), unknown).await;
    assert_eq!(cores(&db), Some(4));
    assert!(db.annotations()[CLASS_ANNOTATION].contains(r#""name":"xlarge""#));
    let denied = refusal(
        api.create(
            &PostParams::default(),
            &machine("huge2", json!({"template": "huge"})),
        )
        .await,
    );
    assert!(
        denied.contains(r#"supported values: "large", "medium", "small", "xlarge""#),
        "{denied}"
    );

    // Overrides beyond the limits, each refusal naming the limit and the class.
    let over = machine(
        "big",
        json!({"template": "xlarge", "resources": {"cpu": {"cores": 32}, "memory": {"size": "256Gi"}}}),
    );
    let denied = refusal(api.create(&PostParams::default(), &over).await);
    for part in [
        r#"spec.resources.cpu.cores: Invalid value: 32: must be at most 16: limits.cpu.maxCores of MachineClass "xlarge""#,
        r#"spec.resources.memory.size: Invalid value: "256Gi": must be at most 128Gi: limits.memory.max of MachineClass "xlarge""#,
    ] {
        assert!(denied.contains(part), "{part}\n{denied}");
    }
    // A class that contradicts itself is refused by its own webhook.
    let mut bad = xlarge(32, "48Gi", "100Gi");
    bad["limits"]["cpu"]["maxCores"] = json!(16);
    let denied = refusal(
        classes(&admin)
            .create(&PostParams::default(), &class("bad", bad))
            .await,
    );
    assert!(denied.contains("spec.limits.cpu.maxCores: Invalid value: 16: must be at least the class's own spec.cpu.cores (32)"), "{denied}");

    // Disabled: new Machines are refused; the one that has it is updated and deleted.
    let merge = |v: Value| Patch::Merge(v);
    classes(&admin)
        .patch(
            "xlarge",
            &PatchParams::default(),
            &merge(json!({"spec": {"enabled": false}})),
        )
        .await
        .expect("disable");
    let deadline = Instant::now() + WAIT;
    let denied = loop {
        let late = machine(&fresh_name("late"), json!({"template": "xlarge"}));
        match api.create(&PostParams::default(), &late).await {
            Err(Error::Api(e)) if e.message.contains("is disabled") => break e.message,
            other => assert!(Instant::now() < deadline, "{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        denied.contains(r#"MachineClass "xlarge" is disabled, new Machines may not use it"#),
        "{denied}"
    );
    let updated = api
        .patch(
            "db",
            &PatchParams::default(),
            &merge(json!({"spec": {"running": false}})),
        )
        .await
        .expect("the Machine that has the class may change");
    assert_eq!(
        (cores(&updated), updated.data["spec"]["running"].as_bool()),
        (Some(4), Some(false))
    );
    api.delete("db", &DeleteParams::default())
        .await
        .expect("and be deleted");
    eventually(WAIT, "db gone", || async {
        api.get_opt("db").await.ok()?.is_none().then_some(())
    })
    .await;

    // One default: the first is in force (a Machine naming none gets it), a second is refused.
    classes(&admin)
        .create(
            &PostParams::default(),
            &class(
                "alpha",
                json!({"default": true, "cpu": {"cores": 3}, "memory": {"size": "6Gi"}}),
            ),
        )
        .await
        .expect("a default class");
    let defaulted = eventually(WAIT, "alpha as the default", || async {
        let m = api
            .create(
                &PostParams::default(),
                &machine(&fresh_name("d"), json!({})),
            )
            .await
            .ok()?;
        (m.data["spec"]["template"] == "alpha").then_some(m)
    })
    .await;
    assert_eq!(cores(&defaulted), Some(3));
    let denied = refusal(
        classes(&admin)
            .create(
                &PostParams::default(),
                &class(
                    "beta",
                    json!({"default": true, "cpu": {"cores": 1}, "memory": {"size": "1Gi"}}),
                ),
            )
            .await,
    );
    assert!(denied.contains("spec.default: Forbidden: at most one MachineClass may be the default, and alpha already is"), "{denied}");
    stop(vec![a, b]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_or_deleting_a_class_leaves_machines_their_vms_and_claims_as_they_are() {
    let env = fixture().start().await;
    let admin = env.admin_client().await;
    let (op, _) = start_replica(&env, OP_NS, "leader", &[]).await;
    let api = machines(&admin, NS);
    first_denial(
        &api,
        &PostParams::default(),
        &machine("huge", json!({"template": "huge"})),
        &op,
    )
    .await;
    classes(&admin)
        .create(
            &PostParams::default(),
            &class("xlarge", xlarge(4, "48Gi", "100Gi")),
        )
        .await
        .expect("class");
    let unknown = |m: &str| m.contains(r#"Unsupported value: "xlarge""#);
    create_when(&api, &machine("db", json!({"template": "xlarge"})), unknown).await;
    let vms = Api::<VirtualMachine>::namespaced(admin.clone(), NS);
    let vm = eventually(WAIT, "db's VM", || async { vms.get_opt("db").await.ok()? }).await;
    let domain = vm.spec.template.spec.domain.clone();
    assert_eq!(domain.cpu.as_ref().and_then(|c| c.cores), Some(4));
    assert_eq!(
        domain.memory.as_ref().and_then(|m| m.guest.as_deref()),
        Some("48Gi")
    );
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NS);
    let root = eventually(WAIT, "db's root claim", || async {
        pvcs.get_opt("db-root").await.ok()?
    })
    .await;
    let size = |c: &PersistentVolumeClaim| {
        c.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .map(|r| r["storage"].0.clone())
    };
    assert_eq!(size(&root).as_deref(), Some("100Gi"));
    // Let the first reconciles' writes settle.
    tokio::time::sleep(RESYNC * 2).await;
    let stored = api.get("db").await.expect("db");
    let before = made_for(&admin, "db").await;

    // Edited: a new Machine gets the new values; db keeps its own, even when an update drops
    // every value the class filled in.
    classes(&admin)
        .patch(
            "xlarge",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": xlarge(8, "64Gi", "200Gi")})),
        )
        .await
        .expect("edit");
    let fresh = eventually(WAIT, "the edited class in force", || async {
        let m = machine(&fresh_name("fresh"), json!({"template": "xlarge"}));
        let m = api.create(&PostParams::default(), &m).await.ok()?;
        (cores(&m) == Some(8)).then_some(m)
    })
    .await;
    assert_eq!(fresh.data["spec"]["disks"][0]["size"], "200Gi");
    let patched = api
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": null}})),
        )
        .await
        .expect("update of db");
    assert_eq!(patched.data["spec"], stored.data["spec"]);
    still_as_made(&api, &admin, &before, "edited").await;

    // Deleted: the same, and db's disks dropped come back as recorded.
    classes(&admin)
        .delete("xlarge", &DeleteParams::default())
        .await
        .expect("delete class");
    eventually(WAIT, "the class gone from the webhooks", || async {
        let m = machine(&fresh_name("later"), json!({"template": "xlarge"}));
        match api.create(&PostParams::default(), &m).await {
            Err(Error::Api(e)) if unknown(&e.message) => Some(()),
            _ => None,
        }
    })
    .await;
    let patched = api
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"disks": null, "resources": null}})),
        )
        .await
        .expect("update of db");
    assert_eq!(patched.data["spec"], stored.data["spec"]);
    still_as_made(&api, &admin, &before, "deleted").await;
    assert_eq!(
        api.get("db").await.expect("db").data["spec"],
        stored.data["spec"]
    );

    // And it can still be deleted: the finalizer's cleanup works from the recorded class.
    api.delete("db", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(WAIT, "db gone", || async {
        api.get_opt("db").await.ok()?.is_none().then_some(())
    })
    .await;
    stop(vec![op]);
}
