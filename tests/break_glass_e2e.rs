//! Issue 33, "deletable without the operator", on the 1.20 control plane (which serves no
//! `matchConditions`): with every operator replica stopped, a deleted Machine stays, its status
//! can still be written, and removing its finalizer is refused; the break-glass commands of
//! docs/operator/troubleshooting.md, read from the page and run as written with kubectl, let it
//! go and close the webhooks again. The same for a MachineRestore (its finalizer
//! `vitistack.io/restore`) and a MachineSnapshot (`vitistack.io/remote-snapshot`), which only the
//! validating webhook checks.

mod access;
mod support;

use std::process::Command;

use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use access::{WAIT, create_admitted, fixture, machine_object, machines};
use kubevirt_operator::api::names::FINALIZER;
use kubevirt_operator::api::snapshots::{REMOTE_SNAPSHOT_FINALIZER, RESTORE_FINALIZER};
use kubevirt_operator::api::{Machine, MachineRestore, MachineSnapshot};

const NS: &str = "team-a";
const NAME: &str = "stuck";
const SNAPSHOT: &str = "snap";
const RESTORE: &str = "back";
const PAGE: &str = "docs/operator/troubleshooting.md";

/// The kubectl lines of the `sh` blocks under `heading` (up to the next heading of any level),
/// with the page's placeholders filled in.
fn commands(heading: &str) -> Vec<String> {
    let page = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE))
        .expect("the troubleshooting page");
    let start = page
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{PAGE} has no {heading:?}"));
    let section = &page[start + heading.len() + 2..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let mut out = Vec::new();
    let mut in_block = false;
    for line in section.lines() {
        match line.trim() {
            "```sh" => in_block = true,
            "```" => in_block = false,
            l if in_block && l.starts_with("kubectl ") => out.push(
                l.replace("<machine>", NAME)
                    .replace("<restore>", RESTORE)
                    .replace("<snapshot>", SNAPSHOT)
                    .replace("<namespace>", NS)
                    .to_owned(),
            ),
            _ => {}
        }
    }
    assert!(!out.is_empty(), "no kubectl commands under {heading:?}");
    out
}

/// Runs `line` with sh, with the test's kubectl first on PATH and the admin's kubeconfig.
fn sh(cp: &support::ControlPlane, line: &str) -> std::process::Output {
    let kubectl = support::kubectl_path().expect("kubectl");
    let path = format!(
        "{}:{}",
        kubectl.parent().expect("kubectl's directory").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .args(["-c", line])
        .env("PATH", path)
        .env("KUBECONFIG", cp.admin_kubeconfig())
        .output()
        .expect("sh")
}

/// Runs every step, each of which must succeed.
fn run_steps(env: &support::ControlPlane, steps: &[String]) {
    for step in steps {
        let out = sh(env, step);
        assert!(
            out.status.success(),
            "{step}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The validating configuration's failure policy of each webhook, in order.
async fn validating_policies(admin: &Client) -> Vec<Option<String>> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let v = Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .get("kubevirt-operator")
        .await
        .expect("validating");
    (v.webhooks.expect("webhooks").into_iter())
        .map(|w| w.failure_policy)
        .collect()
}

async fn failure_policies(admin: &Client) -> (Option<String>, Option<String>) {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    let m = Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .get("kubevirt-operator")
        .await
        .expect("mutating");
    let v = Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .get("kubevirt-operator")
        .await
        .expect("validating");
    (
        m.webhooks.expect("webhooks")[0].failure_policy.clone(),
        v.webhooks.expect("webhooks")[0].failure_policy.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_operator_stopped_the_documented_break_glass_lets_a_machine_go() {
    let mut env = fixture(&[]).start().await;
    let (admin, mut op) = env.take_replica().await;
    let api = machines(&admin, NS);
    let created = create_admitted(
        &api,
        &machine_object(NAME, json!({"template": "small"})),
        &op,
    )
    .await;
    assert_eq!(
        created.metadata.finalizers.as_deref(),
        Some(&[FINALIZER.to_owned()][..]),
        "the mutating webhook added the cleanup finalizer"
    );

    // Every replica stopped (the fixture runs one): nothing deletes the VM or the finalizer.
    op.kill();
    api.delete(NAME, &DeleteParams::default())
        .await
        .expect("delete: no webhook is called for a deletion");
    let typed: Api<Machine> = Api::namespaced(admin.clone(), NS);
    let stored = typed.get(NAME).await.expect("still there");
    assert!(stored.metadata.deletion_timestamp.is_some());

    // Status writes never go through a webhook, so they pass while none answers.
    typed
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Deleting"}})),
        )
        .await
        .expect("a status write while the webhooks are down");

    // The 1.28+ way: on 1.20 there is no matchCondition, so the Fail webhooks refuse it.
    let direct = commands("### Kubernetes 1.28 and later");
    assert_eq!(direct.len(), 1, "{direct:?}");
    let refused = sh(&env, &direct[0]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("failed calling webhook"),
        "removing the finalizer with no replica must fail on 1.20: {stderr}"
    );
    assert!(typed.get_opt(NAME).await.expect("get").is_some());

    // Break glass, exactly as the page says.
    let steps = commands("### Before Kubernetes 1.28: break glass");
    assert_eq!(steps.len(), 5, "{steps:?}");
    for step in &steps {
        let out = sh(&env, step);
        assert!(
            out.status.success(),
            "{step}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    support::eventually(WAIT, "the Machine gone", || async {
        typed
            .get_opt(NAME)
            .await
            .ok()
            .and_then(|m| m.is_none().then_some(()))
    })
    .await;

    // Closed again: Fail, and with no replica a Machine write is refused, not stored unchecked.
    assert_eq!(
        failure_policies(&admin).await,
        (Some("Fail".into()), Some("Fail".into()))
    );
    let refused = api
        .create(
            &PostParams::default(),
            &machine_object("after", json!({"template": "small"})),
        )
        .await;
    match refused {
        Err(kube::Error::Api(e)) => assert!(e.message.contains("failed calling webhook"), "{e:?}"),
        other => panic!("a Machine stored with no webhook answering: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_operator_stopped_the_documented_break_glass_lets_a_restore_and_a_snapshot_go() {
    let mut env = fixture(&[]).start().await;
    let (admin, mut op) = env.take_replica().await;
    let api = machines(&admin, NS);
    create_admitted(
        &api,
        &machine_object(NAME, json!({"template": "small"})),
        &op,
    )
    .await;
    // A snapshot carrying the finalizer the operator puts on one taken on a remote cluster (put
    // on here by the admin: no remote cluster is needed to hold it), and a restore from it,
    // which the operator holds with its own finalizer while the snapshot is not ready.
    let snapshots: Api<MachineSnapshot> = Api::namespaced(admin.clone(), NS);
    let snapshot: MachineSnapshot = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": SNAPSHOT, "finalizers": [REMOTE_SNAPSHOT_FINALIZER]},
        "spec": {"machineName": NAME}
    }))
    .expect("snapshot");
    snapshots
        .create(&PostParams::default(), &snapshot)
        .await
        .expect("snapshot admitted");
    let restores: Api<MachineRestore> = Api::namespaced(admin.clone(), NS);
    let restore: MachineRestore = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineRestore",
        "metadata": {"name": RESTORE},
        "spec": {"machineName": NAME, "snapshotName": SNAPSHOT}
    }))
    .expect("restore");
    restores
        .create(&PostParams::default(), &restore)
        .await
        .expect("restore admitted");
    support::eventually_with(
        WAIT,
        "the restore held by its finalizer",
        || op.log_tail(40),
        || async {
            let r = restores.get_opt(RESTORE).await.ok().flatten()?;
            r.metadata
                .finalizers
                .is_some_and(|f| f.iter().any(|f| f == RESTORE_FINALIZER))
                .then_some(())
        },
    )
    .await;

    // Every replica stopped; deletions pass (no webhook is called for them), the objects stay.
    op.kill();
    restores
        .delete(RESTORE, &DeleteParams::default())
        .await
        .expect("delete the restore");
    snapshots
        .delete(SNAPSHOT, &DeleteParams::default())
        .await
        .expect("delete the snapshot");

    for (heading, webhook) in [
        (
            "### Before Kubernetes 1.28: break glass for a MachineRestore",
            "validate.machinerestores.vitistack.io",
        ),
        (
            "### Before Kubernetes 1.28: break glass for a MachineSnapshot",
            "validate.machinesnapshots.vitistack.io",
        ),
    ] {
        let steps = commands(heading);
        assert_eq!(steps.len(), 3, "{steps:?}");
        // The finalizer removal alone (what 1.28+ lets through): refused on 1.20.
        let refused = sh(&env, &steps[1]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success()
                && stderr.contains(&format!("failed calling webhook \"{webhook}\"")),
            "removing the finalizer with no replica must fail on 1.20: {stderr}"
        );
        run_steps(&env, &steps);
    }
    support::eventually(WAIT, "the restore and the snapshot gone", || async {
        let r = restores.get_opt(RESTORE).await.ok()?;
        let s = snapshots.get_opt(SNAPSHOT).await.ok()?;
        (r.is_none() && s.is_none()).then_some(())
    })
    .await;

    // Closed again: every validating webhook as installed (Fail, the class webhook Ignore), and
    // with no replica a restore is refused, not stored unchecked.
    assert_eq!(
        validating_policies(&admin).await,
        ["Fail", "Fail", "Fail", "Fail", "Ignore"].map(|p| Some(p.to_owned()))
    );
    match restores.create(&PostParams::default(), &restore).await {
        Err(kube::Error::Api(e)) => assert!(e.message.contains("failed calling webhook"), "{e:?}"),
        other => panic!("a MachineRestore stored with no webhook answering: {other:?}"),
    }
}
