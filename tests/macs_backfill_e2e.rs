//! Issue 33's "every address owned", on a real control plane: Machines stored before the MAC
//! rule (no webhook yet: their specs set no address) whose VMs report one in status. Once the
//! operator runs (learning it from the watch's events, and after a restart from its first
//! list), another tenant's new Machine asking that address is refused naming the holder, and
//! the pre-rule Machine's next write (a label change, a spec change) writes the address into
//! its spec, which keeps it from then on. KubeVirt's controllers are played by writing the VMI.

mod access;
mod kubevirt;
mod support;

use std::time::Instant;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};

use access::{OP_NS, WAIT, machines, rule, start_operator, wait_status};
use kubevirt_operator::api::{Machine, NetworkConfiguration};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use support::{Fixture, Proc};

const NS: &str = "team-a";
/// What the VMs of the two pre-rule Machines report, as KubeVirt writes addresses.
const OLD1_MAC: &str = "52:54:00:5e:00:21";
const OLD2_MAC: &str = "52:54:00:5e:00:22";

fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("object")
}

/// As the webhook stored Machines before the MAC rule: with the finalizer (so the reconciler
/// has nothing to write into it), interfaces without addresses.
fn pre_rule(name: &str) -> DynamicObject {
    let mut m = object(
        "Machine",
        name,
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "prod"}]}),
    );
    m.metadata.finalizers = Some(vec!["machine.vitistack.io/cleanup".to_owned()]);
    m
}

/// Bob's Machine in team-b, asking `mac` for its interface.
fn asking(mac: &str) -> DynamicObject {
    object(
        "Machine",
        "taker",
        json!({"template": "small",
               "networks": [{"name": "eth0", "networkName": "prod", "macAddress": mac}]}),
    )
}

fn spec_mac(m: &Machine) -> Option<String> {
    m.spec.networks.first()?.mac_address.clone()
}

async fn vm(admin: &Client, name: &str, op: &Proc) -> VirtualMachine {
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    support::eventually_with(
        WAIT,
        &format!("the VM of {name}"),
        || op.log_tail(40),
        || async { vms.get_opt(name).await.ok().flatten() },
    )
    .await
}

/// The refusal of `obj` with a message `says`, waited for: a dry run until the replica refuses
/// it so (its watch may not have seen the last change yet, or it has not listed yet), then the
/// real create, which must be refused so too. A replica that lets it through for `WAIT` fails.
async fn refused(
    bob: &Api<DynamicObject>,
    obj: &DynamicObject,
    says: impl Fn(&str) -> bool,
    op: &Proc,
) -> String {
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + WAIT;
    loop {
        match bob.create(&dry, obj).await {
            Err(Error::Api(e)) if says(&e.message) => break,
            other => assert!(
                Instant::now() < deadline,
                "the address was not refused as expected: {other:?}\n{}",
                op.log_tail(60)
            ),
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    match bob.create(&PostParams::default(), obj).await {
        Err(Error::Api(e)) if says(&e.message) => e.message,
        Ok(_) => panic!("another tenant's Machine took the address"),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_rule_machines_reported_address_cannot_be_taken_and_stays_through_its_next_updates() {
    let extra = ["--allowed-bridges", "br0"];
    let env = Fixture::new()
        .with_all_crds()
        .namespace(OP_NS)
        .namespace(NS)
        .namespace("team-b")
        .user("bob", &["devs"])
        .grant(
            "team-b",
            "bob",
            vec![rule("vitistack.io", "machines", &["create", "get"])],
        )
        .start()
        .await;
    let admin = env.admin_client().await;
    let api = machines(&admin, NS);
    let typed: Api<Machine> = Api::namespaced(admin.clone(), NS);

    // 1. Stored as before the MAC rule: no webhook is registered yet.
    let ncs: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::erase::<NetworkConfiguration>(&()),
    );
    let nc = object("NetworkConfiguration", "prod", json!({"bridge": "br0"}));
    ncs.create(&PostParams::default(), &nc).await.expect("NC");
    for name in ["old1", "old2"] {
        let stored = api
            .create(&PostParams::default(), &pre_rule(name))
            .await
            .expect("stored with no webhook");
        assert_eq!(
            stored.data["spec"]["networks"][0].get("macAddress"),
            None,
            "a pre-rule Machine"
        );
    }

    // 2. The operator makes their VMs; their VMIs report KubeVirt's addresses, which the
    // Machines' status shows (and the replica's watch sees).
    let mut op = start_operator(&env, OP_NS, &extra).await;
    for (name, mac) in [("old1", OLD1_MAC), ("old2", OLD2_MAC)] {
        vm(&admin, name, &op).await;
        kubevirt::vmi(
            &admin,
            NS,
            name,
            json!({"phase": "Running", "nodeName": "n1",
                   "interfaces": [{"name": "eth0", "mac": mac, "ipAddress": "10.0.0.7"}]}),
        )
        .await;
        wait_status(&admin, NS, name, &op, "the reported address", |s| {
            s.interfaces
                .iter()
                .any(|i| i.mac_address.as_deref() == Some(mac))
        })
        .await;
    }
    let stored = typed.get("old1").await.expect("old1");
    assert_eq!(spec_mac(&stored), None, "status only, so far");

    // 3. Another tenant cannot take it, in either spelling; told who holds it.
    let bob = machines(&env.client_of("bob").await, "team-b");
    let by_old1 = "already used by Machine team-a/old1 (its VM reports it in status)";
    refused(
        &bob,
        &asking(&OLD1_MAC.to_uppercase().replace(':', "-")),
        |m| m.contains(by_old1),
        &op,
    )
    .await;

    // 4. Nor after an operator restart (an upgrade): the first list learns it.
    op.kill();
    let op = start_operator(&env, OP_NS, &extra).await;
    let by_old2 = "already used by Machine team-a/old2 (its VM reports it in status)";
    refused(&bob, &asking(OLD2_MAC), |m| m.contains(by_old2), &op).await;

    // 5. The next write of each writes its address into its spec: a label change, a spec change.
    let params = PatchParams::default();
    let labelled = typed
        .patch(
            "old1",
            &params,
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "web"}}})),
        )
        .await
        .expect("a label change");
    assert_eq!(spec_mac(&labelled).as_deref(), Some(OLD1_MAC));
    let changed = typed
        .patch(
            "old2",
            &params,
            &Patch::Merge(json!({"spec": {"updateStrategy": "Manual"}})),
        )
        .await
        .expect("a spec change");
    assert_eq!(spec_mac(&changed).as_deref(), Some(OLD2_MAC));

    // 6. It stays through the updates after (one leaving networks out, one rewriting them) and
    // is still refused to others, now as a spec address.
    for (name, patch) in [
        ("old1", json!({"spec": {"updateStrategy": "Manual"}})),
        (
            "old2",
            json!({"spec": {"networks": [{"name": "eth0", "networkName": "prod"}]}}),
        ),
    ] {
        let m = typed
            .patch(name, &params, &Patch::Merge(patch))
            .await
            .expect("a later update");
        let want = if name == "old1" { OLD1_MAC } else { OLD2_MAC };
        assert_eq!(spec_mac(&m).as_deref(), Some(want), "{name}");
    }
    refused(
        &bob,
        &asking(OLD1_MAC),
        |m| m.contains("already used by Machine team-a/old1") && !m.contains("its VM reports"),
        &op,
    )
    .await;
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    support::eventually_with(
        WAIT,
        "the VM of old1 given its address",
        || op.log_tail(40),
        || async {
            let vm = vms.get_opt("old1").await.ok().flatten()?;
            let mac = vm.spec.template.spec.domain.devices.interfaces[0]
                .mac_address
                .clone()?;
            (mac == OLD1_MAC).then_some(())
        },
    )
    .await;
}
