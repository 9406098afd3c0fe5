//! The reconciler survives a kube-apiserver restart during which its watches expire.
//!
//! One `kubevirt-operator run` process (never restarted) on a dedicated control plane. While its
//! kube-apiserver is down, a second kube-apiserver on the same etcd (as in an HA control plane)
//! creates a Machine, deletes another Machine's VM, and etcd's history is compacted past every
//! resourceVersion the operator has seen. When the first kube-apiserver is back on the same
//! address, the operator's watches can only resume from versions that are gone: they get
//! 410 Gone ("too old resource version") and must list again. The test checks that they did
//! (the operator's log and kube-apiserver's audit log), and that the operator converged on
//! everything that changed while it was cut off, in the same process and the same controller.

mod operator;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use kubevirt_operator::api::Machine;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use operator::{OPERATOR_USER, Operator, eventually};
use support::{ControlPlane, Fixture};

/// First convergence, on an idle control plane.
const CONVERGE: Duration = Duration::from_secs(60);
/// After the restart: the watchers' backoff grew while the API server was down (client-go's and
/// kube's default: up to 30 s between attempts), so allow for a full backoff period and more.
const RECOVER: Duration = Duration::from_secs(120);

async fn create_machine(client: &Client, ns: &str, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": {"template": "small"}
    }))
    .expect("machine object");
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ApiResource::erase::<Machine>(&()))
        .create(&PostParams::default(), &obj)
        .await
        .expect("create Machine");
}

/// The Machine's VM, its claim and a status naming the VM all exist; returns the Machine's
/// resourceVersion.
async fn converged(client: &Client, ns: &str, name: &str) -> Option<String> {
    let vm = Api::<VirtualMachine>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .ok()??;
    let claim = format!("{name}-root");
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .get_opt(&claim)
        .await
        .ok()??;
    let machine = Api::<Machine>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .ok()??;
    let status = machine.status.as_ref()?;
    (vm.metadata.deletion_timestamp.is_none() && status.vm_name.as_deref() == Some(name))
        .then(|| machine.resource_version().unwrap_or_default())
}

/// Lists the operator made, per resource, from the (first) kube-apiserver's audit log. A
/// watcher lists once when it starts, and again only when it must start over (410 Gone).
fn operator_lists(cp: &ControlPlane, resource: &str) -> usize {
    cp.audited_requests()
        .expect("audit log")
        .iter()
        .filter(|r| r.user == OPERATOR_USER && r.verb == "list" && r.resource == resource)
        .count()
}

/// Copies of the operator's, kube-apiservers' and etcd's logs (and the audit log) that outlive
/// the control plane's directory, for a failure's post-mortem.
fn keep_logs(cp: &ControlPlane, op: &Operator) -> std::path::PathBuf {
    let kept = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reconciler_restart");
    let _ = std::fs::create_dir_all(&kept);
    let _ = std::fs::copy(&op.proc.log, kept.join("operator.log"));
    for entry in std::fs::read_dir(cp.dir()).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log") {
            let _ = std::fs::copy(&path, kept.join(entry.file_name()));
        }
    }
    kept
}

fn log_lines(op: &Operator) -> Vec<String> {
    std::fs::read_to_string(&op.proc.log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_relist_after_an_api_server_restart_past_compacted_history() {
    let began = Instant::now();
    // kube's watcher logs the 410 it gets at debug level.
    // A Lease far longer than the outage: with a short one the leader's guard may (rightly) step
    // down while cut off, and a new controller would list afresh instead of resuming. Renewed at
    // half its length, a 300s Lease leaves at least ~147s of hold when the outage begins, which
    // outlasts a kube-apiserver restart even on a busy 2-core machine (60s did not: CI flake).
    let mut cp = Fixture::new()
        .with_all_crds()
        .operator_with_env(
            "restart",
            &["--leader-election-lease-duration", "300s"],
            &[("RUST_LOG", "info,kube_runtime::watcher=debug")],
        )
        .start()
        .await;
    let admin = cp.admin_client().await;
    let mut op = cp.operator.take().expect("operator");
    let ns = cp.namespace("restart").await.expect("namespace");

    create_machine(&admin, &ns, "first").await;
    let seen = eventually(CONVERGE, "Machine first to converge", || {
        converged(&admin, &ns, "first")
    })
    .await;
    let seen: i64 = seen.parse().expect("numeric resourceVersion");
    let vm_uid = |client: Client, ns: String| async move {
        Api::<VirtualMachine>::namespaced(client, &ns)
            .get("first")
            .await
            .expect("VM first")
            .uid()
    };
    let original_vm = vm_uid(admin.clone(), ns.clone()).await;
    // Settle, so the watches have delivered everything up to here.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let lists_before = (
        operator_lists(&cp, "machines"),
        operator_lists(&cp, "virtualmachines"),
    );
    // Machines have three watchers: the reconciler's, the snapshot schedule's and the webhooks'
    // MAC index; VMs two: the operator's own (labelled, full) and the names cache.
    assert_eq!(lists_before, (3, 2), "one list per watcher so far");

    // The second API server first, so the operator's is down only as long as a restart takes.
    let second = cp.second_apiserver().await.expect("second kube-apiserver");
    let other = second.client().await.expect("second client");
    let down = Instant::now();
    cp.stop_apiserver().expect("stop kube-apiserver");

    create_machine(&other, &ns, "second").await;
    Api::<VirtualMachine>::namespaced(other.clone(), &ns)
        .delete("first", &DeleteParams::default())
        .await
        .expect("delete VM first");
    let compacted = cp.etcd_compact().await.expect("etcd compaction");
    assert!(
        compacted > seen,
        "compacted at {compacted}, past the last version the operator saw ({seen})"
    );
    second.stop();

    cp.start_apiserver().await.expect("restart kube-apiserver");
    let outage = down.elapsed();
    let back = Instant::now();
    let admin = cp.client().await.expect("admin client");
    loop {
        if converged(&admin, &ns, "second").await.is_some()
            && converged(&admin, &ns, "first").await.is_some()
        {
            break;
        }
        if back.elapsed() > RECOVER {
            let kept = keep_logs(&cp, &op);
            panic!(
                "timed out after {RECOVER:?} waiting for Machine second to converge and VM first \
                 to return (logs kept in {})\n{}",
                kept.display(),
                op.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let recovered = back.elapsed();
    assert_ne!(
        vm_uid(admin.clone(), ns.clone()).await,
        original_vm,
        "VM first was made anew"
    );

    // The same process, with the same controller: it resumed its watches, it did not restart.
    assert!(
        op.proc.exited().is_none(),
        "the operator exited\n{}",
        op.log_tail()
    );
    let log = log_lines(&op);
    let count = |needle: &str| log.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(
        (
            count("became leader"),
            count("starting the Machine controller")
        ),
        (1, 1),
        "leadership and the controller were kept\n{}",
        op.log_tail()
    );
    // The watches were told their versions are gone ...
    let gone: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("410") && l.contains("too old resource version"))
        .collect();
    assert!(
        !gone.is_empty(),
        "no 410 Gone in the operator log\n{}",
        op.log_tail()
    );
    // ... and listed again (a plain reconnect would have resumed watching without a list).
    let lists_after = (
        operator_lists(&cp, "machines"),
        operator_lists(&cp, "virtualmachines"),
    );
    assert!(
        lists_after.0 > lists_before.0 && lists_after.1 > lists_before.1,
        "Machines and VMs listed again after the restart: {lists_before:?} -> {lists_after:?}"
    );
    eprintln!(
        "API server down {outage:.1?}; converged {recovered:.1?} after it was back; \
         {} watch 410s logged, e.g. {}; lists (machines, VMs) {lists_before:?} -> {lists_after:?}; \
         test {:.1?}",
        gone.len(),
        gone[0].chars().take(300).collect::<String>(),
        began.elapsed()
    );
    op.proc.kill();
}
