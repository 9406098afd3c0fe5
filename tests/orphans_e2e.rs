//! Issue 33, "leaks listed", on two real control planes: the operator makes the objects of two
//! live Machines (one local, one on the KubevirtConfig `dc1`'s cluster) and is stopped; the test
//! then plants leftovers with proofs under the operator's key (as a deleted or abandoned Machine
//! leaves them), an object proven for an earlier Machine of a live name, one with our labels and
//! a proof under another key, and foreign objects. `kubevirt-operator check --orphans` lists
//! exactly the leftovers, the forged one apart, and deletes nothing; started again, the
//! operator's leader publishes the same counts per cluster and kind on `/metrics`, the cluster it
//! cannot reach as not checked (never as 0), and recounts when a leftover goes.

mod access;
mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use access::{WAIT, create_admitted, machines};
use kubevirt_operator::api::names::{
    MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, PROOF_ANNOTATION,
};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::decide::evidence::{OwnershipKey, Target};
use kubevirt_operator::reconciler::run::ownership_key;
use support::{Fixture, Proc, Started, eventually_with};

const NS: &str = "team-a";
const OP_NS: &str = "access-operator";
const PVC: &str = "PersistentVolumeClaim";
const VM: &str = "VirtualMachine";

async fn dc1(admin: &Client, remote: &Started) {
    let kubeconfig = remote
        .kubeconfig_yaml(remote.admin(), None)
        .expect("remote kubeconfig");
    access::register_cluster(admin, "dc1", Some(kubeconfig)).await;
}

async fn vm_of(client: &Client, op: &Proc, name: &str) -> VirtualMachine {
    let api: Api<VirtualMachine> = Api::namespaced(client.clone(), NS);
    eventually_with(
        WAIT,
        &format!("VM {name}"),
        || op.log_tail(60),
        || async { api.get_opt(name).await.ok().flatten() },
    )
    .await
}

/// Labels and annotations for an object claiming Machine `machine`, with a made-for proof by
/// `key` for (machine, uid), if any.
fn claiming(
    kind: &str,
    name: &str,
    machine: &str,
    proof: Option<(&OwnershipKey, &str)>,
) -> (Value, Value) {
    let labels = json!({MANAGED_BY_LABEL: MANAGED_BY, MACHINE_LABEL: machine});
    let annotations = match proof {
        Some((key, uid)) => {
            let target = Target {
                kind,
                namespace: NS,
                name,
            };
            json!({PROOF_ANNOTATION: key.proof(&target, machine, uid)})
        }
        None => json!({}),
    };
    (labels, annotations)
}

async fn plant_claim(client: &Client, name: &str, meta: Option<(Value, Value)>) {
    let (labels, annotations) = meta.unwrap_or((json!({}), json!({})));
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim");
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pvc)
        .await
        .unwrap_or_else(|e| panic!("claim {name}: {e}"));
}

/// A copy of `template` (a VM the operator made) named `name`, claiming `machine` by `key`.
async fn plant_vm(
    client: &Client,
    template: &VirtualMachine,
    name: &str,
    machine: &str,
    key: &OwnershipKey,
    uid: &str,
) {
    let mut vm = template.clone();
    let (labels, annotations) = claiming(VM, name, machine, Some((key, uid)));
    let meta = vm.meta_mut();
    *meta = Default::default();
    meta.name = Some(name.to_owned());
    meta.labels = serde_json::from_value(labels).expect("labels");
    meta.annotations = serde_json::from_value(annotations).expect("annotations");
    vm.status = None;
    Api::<VirtualMachine>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &vm)
        .await
        .unwrap_or_else(|e| panic!("VM {name}: {e}"));
}

/// The `kubevirt_operator_orphans*` samples the operator's `/metrics` on `port` shows.
async fn orphan_samples(port: u16) -> Option<BTreeSet<String>> {
    let text = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(
        (text.lines())
            .filter(|l| l.starts_with("kubevirt_operator_orphans"))
            .map(str::to_owned)
            .collect(),
    )
}

/// Waits until the orphan samples on `port` are exactly `want`.
async fn until_samples(op: &Proc, port: u16, what: &str, want: &[String]) {
    let want: BTreeSet<String> = want.iter().cloned().collect();
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let last = seen.clone();
    eventually_with(
        WAIT,
        what,
        || {
            let seen = last.lock().map(|s| s.clone()).unwrap_or_default();
            format!("last seen: {seen:#?}\n{}", op.log_tail(60))
        },
        || async {
            let got = orphan_samples(port).await?;
            let done = got == want;
            *seen.lock().ok()? = got;
            done.then_some(())
        },
    )
    .await;
}

/// The samples of one cluster looked at: leftovers and unproven per kind, `[VM, PVC, DV]`.
fn counted(cluster: &str, leftovers: [u32; 3], unproven: [u32; 3]) -> Vec<String> {
    let kinds = [VM, PVC, "DataVolume"];
    let mut out = vec![format!(
        r#"kubevirt_operator_orphans_checked{{cluster="{cluster}"}} 1"#
    )];
    for (i, kind) in kinds.iter().enumerate() {
        out.push(format!(
            r#"kubevirt_operator_orphans{{cluster="{cluster}",kind="{kind}"}} {}"#,
            leftovers[i]
        ));
        out.push(format!(
            r#"kubevirt_operator_orphans_unproven{{cluster="{cluster}",kind="{kind}"}} {}"#,
            unproven[i]
        ));
    }
    out
}

/// `check --orphans` as an admin runs it: (exit code, stdout).
fn check(mgmt: &Started) -> (Option<i32>, String) {
    let out = std::process::Command::new(support::operator::operator_binary())
        .args(["check", "--orphans", "-n", OP_NS])
        .env("KUBECONFIG", mgmt.admin_kubeconfig())
        .env_remove("NAMESPACE")
        .output()
        .expect("run check");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.stderr.is_empty() || !String::from_utf8_lossy(&out.stderr).contains("error"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_orphans_lists_exactly_the_planted_leftovers() {
    let (mgmt, remote) = tokio::join!(
        Fixture::new()
            .with_all_crds()
            .namespace(OP_NS)
            .namespace(NS)
            .start(),
        Fixture::new().with_fixture_crds().start()
    );
    let admin = mgmt.admin_client().await;
    let far_admin = remote.admin_client().await;
    dc1(&admin, &remote).await;
    let mut op =
        access::start_operator(&mgmt, OP_NS, &["--kubevirt-config-probe-interval", "1s"]).await;
    let api = machines(&admin, NS);
    let machine = |name: &str, annotations: Value| -> kube::api::DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"template": "small"}
        }))
        .expect("machine")
    };
    create_admitted(&api, &machine("near", json!({})), &op).await;
    create_admitted(
        &api,
        &machine("far", json!({"vitistack.io/kubevirt-config": "dc1"})),
        &op,
    )
    .await;
    // The live Machines' own objects, made by the operator: never listed.
    let near = vm_of(&admin, &op, "near").await;
    let far = vm_of(&far_admin, &op, "far").await;
    // Every replica stopped: what follows is what the operator left, not what it is doing.
    op.kill();

    // A KubevirtConfig whose cluster cannot be looked at: said, not skipped silently.
    access::register_cluster(&admin, "dc2", None).await;

    let key = ownership_key::read(&admin, OP_NS)
        .await
        .expect("read the key")
        .expect("the operator made its key");
    let other = OwnershipKey::new(&[7; 32], None).expect("another key");
    // Leftovers, proven ours: a deleted Machine's VM and claim here, an abandoned one's VM and
    // claim on dc1, and a claim made for an earlier Machine named `near`.
    plant_vm(&admin, &near, "old", "old", &key, "uid-old").await;
    plant_claim(
        &admin,
        "old-root",
        Some(claiming(PVC, "old-root", "old", Some((&key, "uid-old")))),
    )
    .await;
    plant_vm(&far_admin, &far, "lost", "lost", &key, "uid-lost").await;
    plant_claim(
        &far_admin,
        "lost-root",
        Some(claiming(PVC, "lost-root", "lost", Some((&key, "uid-lost")))),
    )
    .await;
    plant_claim(
        &admin,
        "near-data",
        Some(claiming(
            PVC,
            "near-data",
            "near",
            Some((&key, "uid-earlier")),
        )),
    )
    .await;
    // Claims to be ours: our labels and a proof under another key; our labels alone.
    plant_claim(
        &admin,
        "forged-root",
        Some(claiming(
            PVC,
            "forged-root",
            "near",
            Some((&other, "uid-x")),
        )),
    )
    .await;
    plant_claim(
        &far_admin,
        "labelled",
        Some(claiming(PVC, "labelled", "gone", None)),
    )
    .await;
    // Foreign: no label, no proof.
    plant_claim(&admin, "foreign", None).await;
    plant_claim(&far_admin, "foreign", None).await;

    let (code, out) = check(&mgmt);
    assert_eq!(code, Some(1), "something listed: exit 1\n{out}");
    let listed: BTreeSet<&str> = out
        .lines()
        .filter(|l| l.starts_with("local ") || l.starts_with("dc1 "))
        .collect();
    let want: BTreeSet<&str> = [
        "local VirtualMachine team-a/old Machine=old MachineGone",
        "local PersistentVolumeClaim team-a/old-root Machine=old MachineGone",
        "local PersistentVolumeClaim team-a/near-data Machine=near MachineReplaced",
        "dc1 VirtualMachine team-a/lost Machine=lost MachineGone",
        "dc1 PersistentVolumeClaim team-a/lost-root Machine=lost MachineGone",
        "local PersistentVolumeClaim team-a/forged-root",
        "dc1 PersistentVolumeClaim team-a/labelled",
    ]
    .into();
    assert_eq!(listed, want, "\n{out}");
    // The unproven ones come after their heading, with advice under each leftover.
    let heading = out.find("Claim to be ours").expect("unproven heading");
    assert!(
        out[heading..].contains("team-a/forged-root") && out[heading..].contains("team-a/labelled")
    );
    assert!(out.contains("kubectl delete vm lost -n team-a; a VM is never adopted (on the cluster of KubevirtConfig dc1)"), "{out}");
    assert!(
        out.contains("kubectl delete pvc old-root -n team-a"),
        "{out}"
    );
    assert!(
        out.contains("\nNOT CHECKED: the cluster of KubevirtConfig dc2: no Secret access-operator/dc2-kubeconfig\n"),
        "{out}"
    );
    assert!(
        out.ends_with("5 leftovers, 2 unproven, on 2 clusters; nothing was deleted\n"),
        "{out}"
    );

    // Nothing deleted.
    for (client, names) in [
        (
            &admin,
            &["old-root", "near-data", "forged-root", "foreign"][..],
        ),
        (&far_admin, &["lost-root", "labelled", "foreign"][..]),
    ] {
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
        for name in names {
            let pvc = pvcs
                .get(name)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(pvc.metadata.deletion_timestamp.is_none(), "{name}");
        }
    }
    for (client, name) in [(&admin, "old"), (&far_admin, "lost")] {
        let vm = Api::<VirtualMachine>::namespaced(client.clone(), NS)
            .get(name)
            .await;
        assert!(vm.is_ok_and(|v| v.name_any() == name), "{name}");
    }

    // The leader's gauges: the operator started again, counting every 2 s.
    let port = support::free_port().expect("metrics port");
    let bind = format!("127.0.0.1:{port}");
    let (op, _) = access::start_replica(
        &mgmt,
        OP_NS,
        "counting",
        &[
            "--kubevirt-config-probe-interval",
            "1s",
            "--orphan-check-interval",
            "2s",
            "--metrics-bind-address",
            &bind,
        ],
    )
    .await;
    let not_checked = r#"kubevirt_operator_orphans_checked{cluster="dc2"} 0"#.to_owned();
    let mut want = counted("local", [1, 2, 0], [0, 1, 0]);
    want.extend(counted("dc1", [1, 1, 0], [0, 1, 0]));
    want.push(not_checked.clone());
    until_samples(&op, port, "the planted leftovers counted exactly", &want).await;

    // A leftover deleted: the next look counts one claim less.
    Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NS)
        .delete("old-root", &Default::default())
        .await
        .expect("delete old-root");
    let mut want = counted("local", [1, 1, 0], [0, 1, 0]);
    want.extend(counted("dc1", [1, 1, 0], [0, 1, 0]));
    want.push(not_checked);
    until_samples(&op, port, "old-root no longer counted", &want).await;
}
