//! Issue 20, operating a running Machine, end to end on a real control plane with
//! `kubevirt-operator run` (webhooks and reconciler), playing KubeVirt's VM controller and the
//! guest agent: each run strategy reaches the VM; a new `vitistack.io/restarted-at` deletes the
//! VMI the VM controls exactly once and is recorded; admission refuses a time that is not
//! RFC 3339 and a restart of a Halted Machine; interfaces, guest and AgentConnected follow the
//! VMI.

mod access;
mod kubevirt;
mod support;

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};

use access::machine_object as machine;
use access::{WAIT, first_denial, fixture, machines};
use kubevirt_operator::api::Machine;
use kubevirt_operator::api::names::RESTARTED_AT_ANNOTATION;
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};

const NS: &str = "team-a";

async fn patch(admin: &Client, name: &str, patch: Value) -> Result<Machine, Error> {
    let api: Api<Machine> = Api::namespaced(admin.clone(), NS);
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

async fn run_strategy(admin: &Client, op: &support::Proc, name: &str, want: &str) {
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    support::eventually_with(
        WAIT,
        &format!("runStrategy {want}"),
        || op.log_tail(40),
        || async {
            let vm = vms.get_opt(name).await.ok().flatten()?;
            (vm.spec.run_strategy.as_deref() == Some(want)).then_some(())
        },
    )
    .await;
}

fn vmis(admin: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::erase::<VirtualMachineInstance>(&()),
    )
}

async fn vmi_uid(admin: &Client) -> Option<String> {
    vmis(admin)
        .get_opt("ops")
        .await
        .ok()
        .flatten()?
        .metadata
        .uid
}

/// Now, `ago_s` seconds back, as RFC 3339 (whole seconds).
fn now(ago_s: i64) -> String {
    let t =
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(ago_s);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_machine_is_operated() {
    let env = fixture(&[]).start().await;
    let (admin, op) = (env.admin_client().await, env.replica());

    // 1. Each run strategy reaches the VM; `running` and runStrategy must agree.
    let ops = machine("ops", json!({"template": "small", "runStrategy": "Manual"}));
    let refused = first_denial(
        &machines(&admin, NS),
        &PostParams::default(),
        &machine(
            "clash",
            json!({"template": "small", "runStrategy": "Halted", "running": true}),
        ),
        op,
    )
    .await;
    assert!(
        refused.contains("spec.running: Invalid value: true: must agree"),
        "{refused}"
    );
    machines(&admin, NS)
        .create(&PostParams::default(), &ops)
        .await
        .expect("ops");
    run_strategy(&admin, op, "ops", "Manual").await;
    for strategy in ["RerunOnFailure", "Halted", "Always"] {
        patch(&admin, "ops", json!({"spec": {"runStrategy": strategy}}))
            .await
            .expect("run strategy");
        run_strategy(&admin, op, "ops", strategy).await;
    }

    // 2. Interfaces, guest and AgentConnected follow the VMI (no agent yet, then one).
    kubevirt::vmi(
        &admin,
        NS,
        "ops",
        json!({"phase": "Running", "nodeName": "n1",
        "interfaces": [{"name": "default", "mac": "02:00:00:00:00:01", "ipAddress": "10.0.0.7"}]}),
    )
    .await;
    let s = access::wait_status(&admin, NS, "ops", op, "AgentNotConnected", |s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "AgentConnected" && c.reason == "AgentNotConnected")
    })
    .await;
    assert_eq!(
        s.interfaces[0].mac_address.as_deref(),
        Some("02:00:00:00:00:01")
    );
    assert_eq!(s.guest, None);
    let agent = json!({"phase": "Running", "nodeName": "n1",
        "conditions": [{"type": "AgentConnected", "status": "True"}],
        "guestOSInfo": {"name": "Debian GNU/Linux", "version": "12", "kernelRelease": "6.1.0-27-amd64"},
        "interfaces": [{"name": "default", "mac": "02:00:00:00:00:01",
                        "ipAddresses": ["10.0.0.7", "fd00::7"], "interfaceName": "enp1s0"}]});
    kubevirt::vmi(&admin, NS, "ops", agent.clone()).await;
    let s = access::wait_status(&admin, NS, "ops", op, "the guest agent's report", |s| {
        s.guest.is_some()
    })
    .await;
    let guest = s.guest.expect("guest");
    assert_eq!(guest.os_name.as_deref(), Some("Debian GNU/Linux"));
    assert_eq!(guest.kernel_release.as_deref(), Some("6.1.0-27-amd64"));
    assert_eq!(s.interfaces[0].interface_name.as_deref(), Some("enp1s0"));
    assert_eq!(s.interfaces[0].ip_addresses, ["10.0.0.7", "fd00::7"]);

    // 3. A restart: the VMI deleted once, the value recorded; a VMI KubeVirt starts afterwards
    // stays. Admission refuses a time that is not one.
    let refused = patch(
        &admin,
        "ops",
        json!({"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: "now"}}}),
    )
    .await
    .expect_err("not RFC 3339");
    assert!(
        refused.to_string().contains("must be an RFC 3339 time"),
        "{refused}"
    );
    let first = vmi_uid(&admin).await.expect("the VMI");
    tokio::time::sleep(Duration::from_millis(1100)).await; // a time after the VMI's creation
    let at = now(0);
    patch(
        &admin,
        "ops",
        json!({"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: at}}}),
    )
    .await
    .expect("restart");
    support::eventually_with(
        WAIT,
        "the VMI deleted",
        || op.log_tail(40),
        || async { (vmi_uid(&admin).await.as_deref() != Some(first.as_str())).then_some(()) },
    )
    .await;
    let s = access::wait_status(&admin, NS, "ops", op, "lastRestart", |s| {
        s.last_restart.as_deref() == Some(at.as_str())
    })
    .await;
    assert_eq!(s.last_restart.as_deref(), Some(at.as_str()));
    // KubeVirt's VM controller starts a new VMI; a later reconcile leaves it.
    let mut restarted = agent.clone();
    restarted["nodeName"] = json!("n2");
    kubevirt::vmi(&admin, NS, "ops", restarted).await;
    let second = vmi_uid(&admin).await.expect("the new VMI");
    access::wait_status(&admin, NS, "ops", op, "the new VMI's node", |s| {
        s.node_name.as_deref() == Some("n2")
    })
    .await;
    assert_eq!(
        vmi_uid(&admin).await,
        Some(second),
        "restarted once, not again"
    );
    let events = support::events_about(&admin, NS, "ops").await;
    let restarts = events.iter().filter(|(_, r, _)| r == "Restarted").count();
    assert_eq!(restarts, 1, "{events:?}");

    // 4. A Halted Machine has nothing to restart.
    patch(&admin, "ops", json!({"spec": {"runStrategy": "Halted"}}))
        .await
        .expect("halt");
    let refused = patch(
        &admin,
        "ops",
        json!({"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now(60)}}}),
    )
    .await
    .expect_err("a Halted Machine");
    assert!(
        refused
            .to_string()
            .contains("a Halted Machine has nothing to restart"),
        "{refused}"
    );
}
