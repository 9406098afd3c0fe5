//! Issue 34, the power buttons performed through the Machine: `machines/stop` (with a grace
//! period), `forcestop`, `start`, `restart`, on a real kube-apiserver with the operator's
//! aggregated API registered, KubeVirt played (its subresource API by a test server, its
//! controllers by the test writing and deleting VMIs as they would), on the operator's own
//! cluster and on a remote one (KubevirtConfig dc1). A GitOps tool's re-apply of the Machine's
//! manifest (server-side apply by another field manager, as a non-admin user) does not undo a
//! stop.

mod aggregated;
mod kubevirt;
mod power;
mod support;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use kubevirt_operator::api::Machine;
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};

use support::operator::OPERATOR_USER;
use support::rbac::rule;
use support::virt_api::{Call, PlayedVirtApi};
use support::{Fixture, OPERATOR_NAMESPACE, Started, events_about, eventually};

use power::{Env, GROUP, WAIT, far_machine, machine_path, put_status, put_with, vmi_running};

const STOPPED_AT: &str = "vitistack.io/stopped-at";
const RESTARTED_AT: &str = "vitistack.io/restarted-at";

/// alice may press stop, forcestop, start and restart in team-a; bob may only pause there;
/// gitops applies Machines in team-a (a GitOps tool's rights, no admin).
fn users(f: Fixture) -> Fixture {
    let buttons = ["stop", "forcestop", "start", "restart"]
        .map(|b| rule(GROUP, &format!("machines/{b}"), &["update"]));
    f.user("alice", &[])
        .grant("team-a", "alice", buttons.to_vec())
        .user("bob", &[])
        .grant(
            "team-a",
            "bob",
            vec![rule(GROUP, "machines/pause", &["update"])],
        )
        .user("gitops", &[])
        .grant(
            "team-a",
            "gitops",
            vec![rule(
                "vitistack.io",
                "machines",
                &["get", "list", "create", "patch"],
            )],
        )
}

/// The GitOps tool's manifest of team-a/vm-1: it owns `runStrategy: Always`.
fn manifest(update_strategy: Option<&str>) -> serde_json::Value {
    let mut spec = serde_json::json!({ "template": "small", "runStrategy": "Always" });
    if let Some(u) = update_strategy {
        spec["updateStrategy"] = u.into();
    }
    serde_json::json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": { "name": "vm-1", "namespace": "team-a" },
        "spec": spec,
    })
}

async fn gitops_apply(gitops: &Client, manifest: &serde_json::Value) {
    let params = PatchParams::apply("argocd-controller").force();
    Api::<Machine>::namespaced(gitops.clone(), "team-a")
        .patch("vm-1", &params, &Patch::Apply(manifest))
        .await
        .expect("the GitOps tool's server-side apply");
}

/// The run strategy the operator wrote on the VM `ns/name` of `cluster`, once it is `want`.
async fn vm_run_strategy(cluster: &Client, ns: &str, name: &str, want: &str) {
    let vms = Api::<VirtualMachine>::namespaced(cluster.clone(), ns);
    let seen = std::sync::Mutex::new(String::new());
    let last = || seen.lock().map(|s| s.clone()).unwrap_or_default();
    support::eventually_with(WAIT, &format!("VM {ns}/{name} {want}"), last, || async {
        let vm = vms.get(name).await.ok()?;
        let strategy = vm.spec.run_strategy.unwrap_or_default();
        if let Ok(mut seen) = seen.lock() {
            seen.clone_from(&strategy);
        }
        (strategy == want).then_some(())
    })
    .await;
}

fn annotation(m: &Machine, key: &str) -> Option<String> {
    m.metadata.annotations.as_ref()?.get(key).cloned()
}

/// Waits until the VMI `ns/name` of uid `uid` on `cluster` is gone (or replaced).
async fn vmi_gone(env: &Started, cluster: &Client, (ns, name): (&str, &str), uid: Option<String>) {
    assert!(uid.is_some(), "a VMI to see go");
    let vmis = Api::<VirtualMachineInstance>::namespaced(cluster.clone(), ns);
    let log = || env.operator().log_tail();
    support::eventually_with(WAIT, &format!("VMI {ns}/{name} deleted"), log, || async {
        let now = vmis.get_opt(name).await.ok()?;
        (now.is_none() || now.and_then(|v| v.metadata.uid) != uid).then_some(())
    })
    .await;
}

async fn vmi_uid(cluster: &Client, ns: &str, name: &str) -> Option<String> {
    Api::<VirtualMachineInstance>::namespaced(cluster.clone(), ns)
        .get(name)
        .await
        .expect("the VMI")
        .metadata
        .uid
}

/// `who` deleted VMI `ns/name` on `cp`, as its audit log says.
fn audited_vmi_deletion(cp: &Started, who: &str, ns: &str, name: &str) -> bool {
    cp.audited_requests().expect("audit log").iter().any(|r| {
        r.verb == "delete"
            && r.resource == "virtualmachineinstances"
            && r.user == who
            && r.namespace == ns
            && r.name == name
            && r.code == 200
    })
}

/// The Event `reason` on team-a's Machine `name`, its note.
async fn event(admin: &Client, name: &str, reason: &str) -> String {
    eventually(WAIT, &format!("the {reason} Event"), || async {
        let events = events_about(admin, "team-a", name).await;
        events
            .into_iter()
            .find(|(_, r, _)| r == reason)
            .map(|(_, _, note)| note)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_start_restart_and_forcestop_through_the_machine_on_the_operators_cluster() {
    let Env { env, .. } = power::start(&[], users).await;
    let admin = env.admin_client().await;
    let virt_api = PlayedVirtApi::start(&admin, OPERATOR_NAMESPACE, "virt-api").await;
    let (alice, bob, gitops) = (
        env.client_of("alice").await,
        env.client_of("bob").await,
        env.client_of("gitops").await,
    );
    let machines = Api::<Machine>::namespaced(admin.clone(), "team-a");
    gitops_apply(&gitops, &manifest(None)).await;
    vmi_running(&admin, "team-a", "vm-1").await;
    let path = |sub| machine_path("team-a", "vm-1", sub);

    // Authorized on the Machine's subresource, in its namespace, by kube-apiserver.
    assert_eq!(
        put_status(&bob, &path("stop")).await,
        403,
        "no machines/stop"
    );
    let team_b = machine_path("team-b", "vm-1", "stop");
    assert_eq!(put_status(&alice, &team_b).await, 403, "another namespace");
    // A grace period out of bounds, named.
    let (code, message) = put_with(&alice, &path("stop"), r#"{"gracePeriod": 99999999}"#).await;
    assert_eq!(code, 400, "{message}");
    assert!(message.contains("gracePeriod"), "{message}");
    assert_eq!(virt_api.calls(), vec![], "nothing done");
    let m = machines.get("vm-1").await.expect("Machine");
    assert_eq!(annotation(&m, STOPPED_AT), None);

    // stop --grace 300: KubeVirt's own stop with the grace (the operator's credentials), the
    // stop recorded on the Machine, the VM halted by the reconciler.
    let (code, message) = put_with(&alice, &path("stop"), r#"{"gracePeriod": 300}"#).await;
    assert_eq!(code, 200, "{message}");
    let stop = Call {
        target: "virtualmachines/team-a/vm-1/stop".to_owned(),
        user: OPERATOR_USER.to_owned(),
        body: r#"{"gracePeriod":300}"#.to_owned(),
    };
    assert_eq!(virt_api.calls(), vec![stop.clone()]);
    let m = machines.get("vm-1").await.expect("Machine");
    let stopped_at = annotation(&m, STOPPED_AT).expect("the stop recorded");
    assert_eq!(
        m.spec.run_strategy.as_deref(),
        Some("Always"),
        "spec untouched"
    );
    vm_run_strategy(&admin, "team-a", "vm-1", "Halted").await;
    // KubeVirt's VM controller ends the halted VM's VMI.
    let uid = vmi_uid(&admin, "team-a", "vm-1").await;
    Api::<VirtualMachineInstance>::namespaced(admin.clone(), "team-a")
        .delete("vm-1", &Default::default())
        .await
        .expect("KubeVirt deletes the VMI");
    vmi_gone(&env, &admin, ("team-a", "vm-1"), uid).await;
    let note = event(&admin, "vm-1", "StopRequested").await;
    assert!(
        note.contains("by alice") && note.contains("grace period 300"),
        "{note}"
    );

    // The GitOps tool re-applies its manifest (runStrategy: Always), unchanged and then with a
    // change the reconciler acts on: the Machine stays stopped.
    gitops_apply(&gitops, &manifest(None)).await;
    gitops_apply(&gitops, &manifest(Some("Manual"))).await;
    let m = eventually(
        WAIT,
        "the reconciler to see the re-applied spec",
        || async {
            let m = machines.get("vm-1").await.ok()?;
            let seen = m.status.as_ref()?.observed_generation;
            (seen == m.metadata.generation).then_some(m)
        },
    )
    .await;
    assert_eq!(annotation(&m, STOPPED_AT), Some(stopped_at.clone()));
    vm_run_strategy(&admin, "team-a", "vm-1", "Halted").await;

    // A stopped Machine is started, not restarted or stopped again.
    assert_eq!(put_status(&alice, &path("restart")).await, 409);
    assert_eq!(put_status(&alice, &path("stop")).await, 409);
    assert_eq!(put_status(&alice, &path("start")).await, 200);
    let m = machines.get("vm-1").await.expect("Machine");
    assert_eq!(annotation(&m, STOPPED_AT), None, "the stop undone");
    vm_run_strategy(&admin, "team-a", "vm-1", "Always").await;
    assert_eq!(put_status(&alice, &path("start")).await, 409, "not stopped");
    vmi_running(&admin, "team-a", "vm-1").await;

    // restart: recorded on the Machine, the reconciler deletes the VMI it started before.
    let uid = vmi_uid(&admin, "team-a", "vm-1").await;
    assert_eq!(put_status(&alice, &path("restart")).await, 200);
    let m = machines.get("vm-1").await.expect("Machine");
    assert!(
        annotation(&m, RESTARTED_AT).is_some(),
        "the restart recorded"
    );
    vmi_gone(&env, &admin, ("team-a", "vm-1"), uid).await;
    vmi_running(&admin, "team-a", "vm-1").await;

    // forcestop: recorded, and the VMI deleted by the operator at once.
    let uid = vmi_uid(&admin, "team-a", "vm-1").await;
    assert_eq!(put_status(&alice, &path("forcestop")).await, 200);
    vmi_gone(&env, &admin, ("team-a", "vm-1"), uid).await;
    assert!(audited_vmi_deletion(&env, OPERATOR_USER, "team-a", "vm-1"));
    let m = machines.get("vm-1").await.expect("Machine");
    assert!(
        annotation(&m, STOPPED_AT).is_some(),
        "the force stop recorded"
    );
    vm_run_strategy(&admin, "team-a", "vm-1", "Halted").await;
    assert_eq!(
        virt_api.calls(),
        vec![stop],
        "KubeVirt's stop only for the grace"
    );

    for reason in [
        "StopRequested",
        "StartRequested",
        "RestartRequested",
        "ForceStopped",
    ] {
        let note = event(&admin, "vm-1", reason).await;
        assert!(note.contains("by alice"), "{reason}: {note}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_machine_is_stopped_and_force_stopped_on_its_cluster() {
    let (Env { env, .. }, remote) = tokio::join!(
        power::start(&["--kubevirt-config-probe-interval", "1s"], users),
        Fixture::new().with_fixture_crds().start()
    );
    let admin = env.admin_client().await;
    let far_admin = remote.admin_client().await;
    let virt_api = far_machine(&env, &remote).await;
    let alice = env.client_of("alice").await;
    let path = |sub| machine_path("team-a", "far", sub);

    let (code, message) = put_with(&alice, &path("stop"), r#"{"gracePeriod": 120}"#).await;
    assert_eq!(code, 200, "{message}");
    let calls = virt_api.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].target, "virtualmachines/team-a/far/stop");
    assert_eq!(calls[0].body, r#"{"gracePeriod":120}"#);
    assert_eq!(
        calls[0].user, "admin-token",
        "the operator's credentials for dc1"
    );
    vm_run_strategy(&far_admin, "team-a", "far", "Halted").await;

    // The guest does not shut down: forcestop deletes its VMI on dc1.
    let uid = vmi_uid(&far_admin, "team-a", "far").await;
    assert_eq!(put_status(&alice, &path("forcestop")).await, 200);
    vmi_gone(&env, &far_admin, ("team-a", "far"), uid).await;
    assert!(audited_vmi_deletion(
        &remote,
        "admin-token",
        "team-a",
        "far"
    ));
    assert!(!audited_vmi_deletion(&env, OPERATOR_USER, "team-a", "far"));
    let note = event(&admin, "far", "ForceStopped").await;
    assert!(note.contains("by alice") && note.contains("dc1"), "{note}");
}
