//! Without Multus, an odd cached object, long messages, log fields.

use crate::ownership::*;
use crate::support::all_crds;
#[allow(unused_imports)]
use crate::*;
use kube::api::DeleteParams;
use serde_json::{Value, json};
use std::path::PathBuf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_multus_the_leader_is_ready_and_machines_without_networks_get_their_vms() {
    let crds: Vec<PathBuf> = all_crds()
        .into_iter()
        .filter(|p| {
            !p.to_string_lossy()
                .contains("network-attachment-definitions")
        })
        .collect();
    let (cp, env) = dedicated(crds, "no-multus").await;
    env.network_configuration("lan", "br0", 0).await;
    let op = start_dedicated_operator(&cp);
    env.until("/readyz 200 on the leader without the NAD CRD", || async {
        (op.readyz().await == Some(200)).then_some(())
    })
    .await;

    env.machine("plain", json!({"template": "small"})).await;
    env.machine(
        "wired",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lan"}]}),
    )
    .await;
    env.wait_for(&vm_ar(), "plain").await;
    env.wait_phase("plain", "Creating").await;
    let message = env
        .wait_condition("wired", "NetworkReady", "False", "MultusNotInstalled")
        .await;
    assert!(!message.is_empty());
    assert!(env.get(&vm_ar(), "wired").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_odd_object_in_a_cache_does_not_stop_other_machines() {
    let (cp, env) = dedicated(all_crds(), "odd-shape").await;
    // Carries the operator's labels, so it is in the VM cache; `memory.guest` as a JSON number
    // is valid for KubeVirt's schema (int-or-string).
    env.create(
        &vm_ar(),
        json!({"metadata": {"name": "odd", "labels": {
                MANAGED_BY_LABEL: MANAGED_BY, MACHINE_LABEL: "odd"}},
               "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {
                   "memory": {"guest": 1073741824_u64}, "devices": {}}}}}}),
    )
    .await;
    let odd = env.get(&vm_ar(), "odd").await.expect("odd VM");
    assert!(
        odd.pointer("/spec/template/spec/domain/memory/guest")
            .is_some_and(Value::is_number),
        "stored as a number: {odd}"
    );
    let op = start_dedicated_operator(&cp);
    env.machine("fine", json!({"template": "small"})).await;
    env.wait_for(&vm_ar(), "fine").await;
    let m = env.wait_phase("fine", "Creating").await;
    assert_eq!(m.pointer("/status/vmName"), Some(&json!("fine")));
    env.until("/readyz 200 with the odd VM cached", || async {
        (op.readyz().await == Some(200)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_problem_messages_become_truncated_events() {
    let env = env("long-event").await;
    // No webhook here: the template name is stored as written, and the problem names it.
    let template = format!("t{}", "x".repeat(1500));
    env.machine("long", json!({"template": template})).await;
    env.until("a condition naming the long template", || async {
        let m = env.get(&machine_ar(), "long").await?;
        m["status"]["conditions"]
            .as_array()?
            .iter()
            // Field errors echo at most 256 bytes of a value.
            .any(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|s| s.contains(&template[..200]))
            })
            .then_some(())
    })
    .await;
    let (type_, note) = env.wait_event("long", "TemplateNotFound").await;
    assert_eq!(type_, "Warning");
    assert!(
        !note.is_empty() && note.len() <= 1024,
        "{} bytes",
        note.len()
    );
    assert!(note.contains(&template[..200]), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_log_lines_carry_the_spec_fields() {
    let env = env("log-fields").await;
    let name = "spec-log-fields";
    env.machine(name, json!({"template": "small"})).await;
    env.wait_phase(name, "Creating").await;
    env.delete(&machine_ar(), name, &DeleteParams::default())
        .await;
    env.wait_gone(&machine_ar(), name).await;
    // The cleanup's last line may reach the file after the Machine is gone: waited for.
    let lines = env
        .until("the log lines up to the cleanup's last", || async {
            let text = std::fs::read_to_string(&env.operator_log).ok()?;
            let mine = || text.lines().filter(|l| l.contains(&env.ns));
            if !mine().any(|l| l.contains("cleanup finished, finalizer removed")) {
                return None;
            }
            let lines: Vec<Value> = mine()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|l| {
                    l["target"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("kubevirt_operator"))
                })
                .collect();
            Some(lines)
        })
        .await;
    assert!(
        lines.len() >= 2,
        "expected log lines of the reconcile and the cleanup: {lines:#?}"
    );
    for line in &lines {
        assert!(
            line["controller"].as_str().is_some_and(|c| !c.is_empty()),
            "no controller: {line}"
        );
        assert_eq!(line["machine"], name, "{line}");
        assert_eq!(line["namespace"], env.ns.as_str(), "{line}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l["phase"].as_str().is_some_and(|p| !p.is_empty())),
        "no line names the phase: {lines:#?}"
    );
}
