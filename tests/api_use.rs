//! Issue 18, "API use proportional to change", on a real control plane of its own per test,
//! against the `kubevirt-operator run` binary as a user holding exactly `manifests/rbac/`
//! (tests/operator), counted from the API server's audit log:
//!
//! - a converged Machine with a cloud-init `secretRef` reads at most one Secret per resync (the
//!   user's: its data decides the derived one), never the derived `<machine>-cloudinit`;
//! - with a Machine CRD older than the operator (no `status.disks`, no `status.vmStatus`: the
//!   API server prunes them), status is not written again and again, and the operator says
//!   which fields the CRD lacks.

mod operator;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use kubevirt_operator::api::Machine;
use operator::{OPERATOR_USER, Operator, RESYNC};
use support::{AuditedRequest, ControlPlane, Fixture, Started, eventually_with, log_tail};

const WAIT: Duration = Duration::from_secs(60);
/// Resyncs the counts run over, once the Machines have converged.
const PERIODS: u32 = 5;

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A control plane of its own with `machine_crds` (and KubeVirt's, Multus' and CDI's fixtures),
/// the operator running on it, an admin client and a namespace.
async fn dedicated(machine_crds: &Path, prefix: &str) -> (Started, Client, String) {
    let cp = Fixture::new()
        .with_fixture_crds()
        .with_crds([machine_crds.to_owned()])
        .operator("api-use", &[])
        .start()
        .await;
    let admin = cp.admin_client().await;
    let ns = cp.namespace(prefix).await.expect("namespace");
    (cp, admin, ns)
}

async fn secret(client: &Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create Secret");
}

async fn machine(client: &Client, ns: &str, name: &str, spec: Value) {
    let m: Machine = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec}))
    .expect("Machine");
    Api::<Machine>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &m)
        .await
        .expect("create Machine");
}

/// Waits until every Machine has a status naming its VM.
async fn converged(client: &Client, ns: &str, names: &[&str], op: &Operator) {
    let machines = Api::<Machine>::namespaced(client.clone(), ns);
    for name in names {
        eventually_with(
            WAIT,
            &format!("Machine {name} to name its VM"),
            || log_tail(&op.proc.log, 60),
            || async {
                let m = machines.get(name).await.ok()?;
                m.status.and_then(|s| s.vm_name).map(drop)
            },
        )
        .await;
    }
}

/// The operator's requests in `ns`, as the audit log has them so far.
fn operator_requests(cp: &ControlPlane, ns: &str) -> Vec<AuditedRequest> {
    cp.audited_requests()
        .expect("audit log")
        .into_iter()
        .filter(|r| r.user == OPERATOR_USER && r.namespace == ns)
        .collect()
}

/// The operator's requests in `ns` during `period`, from now on.
async fn requests_during(cp: &ControlPlane, ns: &str, period: Duration) -> Vec<AuditedRequest> {
    let before = operator_requests(cp, ns).len();
    tokio::time::sleep(period).await;
    // The audit log is written as requests complete: let the last ones land.
    tokio::time::sleep(Duration::from_millis(500)).await;
    operator_requests(cp, ns).split_off(before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_machine_reads_at_most_one_secret_per_resync() {
    let (cp, admin, ns) = dedicated(&manifest("manifests/crds.yaml"), "secret-reads").await;
    let op = cp.operator();
    // Two Machines whose Secret keeps user data under `userdata` (the VM names the Secret) and
    // two under another key (the operator derives `<machine>-cloudinit`).
    secret(&admin, &ns, "plain", &[("userdata", "#cloud-config\n")]).await;
    secret(&admin, &ns, "keyed", &[("boot", "#cloud-config\n")]).await;
    let machines = [
        ("direct-a", "plain", None),
        ("direct-b", "plain", None),
        ("derived-a", "keyed", Some("boot")),
        ("derived-b", "keyed", Some("boot")),
    ];
    for (name, secret, key) in machines {
        let mut secret_ref = json!({"name": secret});
        if let Some(key) = key {
            secret_ref["key"] = key.into();
        }
        machine(
            &admin,
            &ns,
            name,
            json!({"template": "small", "cloudInit": {"secretRef": secret_ref}}),
        )
        .await;
    }
    let names: Vec<&str> = machines.iter().map(|(n, ..)| *n).collect();
    converged(&admin, &ns, &names, op).await;
    let derived = Api::<Secret>::namespaced(admin.clone(), &ns);
    for name in ["derived-a", "derived-b"] {
        let s = derived
            .get(&format!("{name}-cloudinit"))
            .await
            .expect("derived Secret");
        assert!(s.data.expect("data").contains_key("userdata"), "{name}");
    }
    // Let the first reconciles' own writes come back as events and settle.
    tokio::time::sleep(RESYNC * 2).await;

    let window = RESYNC * PERIODS;
    let requests = requests_during(&cp, &ns, window).await;
    let secret_gets: Vec<&AuditedRequest> = requests
        .iter()
        .filter(|r| r.resource == "secrets" && r.verb == "get")
        .collect();
    let mut per_machine: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &secret_gets {
        *per_machine.entry(r.name.as_str()).or_default() += 1;
    }
    eprintln!(
        "Secret GETs over {window:?} ({PERIODS} resyncs of {RESYNC:?}), 4 Machines: {} in all, \
         by Secret: {per_machine:?}",
        secret_gets.len()
    );
    // The user's Secrets are shared: `plain` by two Machines, `keyed` by two.
    let bound = 2 * (PERIODS as usize + 1);
    for source in ["plain", "keyed"] {
        let n = per_machine.get(source).copied().unwrap_or_default();
        assert!(
            n <= bound,
            "{n} GETs of Secret {source} (2 Machines) in {PERIODS} resyncs: more than one per \
             Machine per resync"
        );
    }
    let derived_reads: Vec<_> = secret_gets
        .iter()
        .filter(|r| r.name.ends_with("-cloudinit"))
        .collect();
    assert!(
        derived_reads.is_empty(),
        "the derived Secrets were read {} times while nothing changed: {derived_reads:?}",
        derived_reads.len()
    );
    let writes: Vec<_> = requests
        .iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .collect();
    assert!(writes.is_empty(), "converged, yet written: {writes:?}");

    // A change of the user's Secret still reaches the derived one.
    let patch = json!({"data": {"boot": ByteString(b"#cloud-config\nhostname: x\n".to_vec())}});
    derived
        .patch(
            "keyed",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .expect("patch Secret");
    eventually_with(
        WAIT,
        "the derived Secret to follow its source",
        || log_tail(&op.proc.log, 60),
        || async {
            let s = derived.get("derived-a-cloudinit").await.ok()?;
            let data = s.data?.get("userdata")?.0.clone();
            (data == b"#cloud-config\nhostname: x\n").then_some(())
        },
    )
    .await;
}

/// `manifests/crds.yaml` as an older release shipped it: the Machine CRD's status schema
/// without `disks` and `vmStatus`. Written to `dir`; returns the file.
fn older_machine_crds(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(manifest("manifests/crds.yaml")).expect("crds.yaml");
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let mut crd: Value = serde::Deserialize::deserialize(doc).expect("CRD YAML");
        if crd.is_null() {
            continue;
        }
        if crd["metadata"]["name"] == "machines.vitistack.io" {
            for version in crd["spec"]["versions"].as_array_mut().expect("versions") {
                let status = version
                    .pointer_mut("/schema/openAPIV3Schema/properties/status/properties")
                    .and_then(Value::as_object_mut)
                    .expect("status properties");
                for field in ["disks", "vmStatus"] {
                    assert!(status.remove(field).is_some(), "the CRD has status.{field}");
                }
            }
        }
        docs.push(serde_yaml::to_string(&crd).expect("YAML"));
    }
    let path = dir.join("older-crds.yaml");
    std::fs::write(&path, docs.join("---\n")).expect("write CRDs");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_machine_crd_causes_no_status_write_loop() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let crds = older_machine_crds(dir.path());
    let (cp, admin, ns) = dedicated(&crds, "older-crd").await;
    let op = cp.operator();
    // A blank disk is in status.disks (its claim), which this CRD prunes.
    machine(&admin, &ns, "plain", json!({"template": "small"})).await;
    converged(&admin, &ns, &["plain"], op).await;
    tokio::time::sleep(RESYNC * 2).await;

    let window = RESYNC * PERIODS;
    let requests = requests_during(&cp, &ns, window).await;
    let status_writes = requests
        .iter()
        .filter(|r| r.resource == "machines" && r.subresource == "status" && r.verb == "patch")
        .count();
    eprintln!(
        "status PATCHes over {window:?} ({PERIODS} resyncs) with the older CRD: {status_writes}"
    );
    assert_eq!(
        status_writes,
        0,
        "the status is written again and again\n{}",
        log_tail(&op.proc.log, 40)
    );
    let log = std::fs::read_to_string(&op.proc.log).expect("operator log");
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"level\":\"warn\"") && l.contains("the served Machine CRD lacks"))
        .collect();
    // At leader start, from the served schema; and once, from the write the server pruned.
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("lacks status.disks, status.vmStatus: upgrade the CRD")),
        "no warning from the CRD's schema:\n{log}"
    );
    assert_eq!(
        warnings
            .iter()
            .filter(|l| l.contains("lacks status.disks: upgrade the CRD"))
            .count(),
        1,
        "the pruned field is named once:\n{warnings:#?}"
    );
}
