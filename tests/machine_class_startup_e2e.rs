//! A replica and its MachineClasses at start-up, on a real control plane: without the
//! MachineClass CRD (an upgrade that kept the old CRDs: Helm never upgrades them) the built-ins
//! are in force and the watch keeps trying, so classes work once the CRD is applied; a replica
//! that cannot read MachineClasses is not ready, and says why.

mod access;
mod machine_class;
mod support;

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use kube::api::PostParams;
use serde::Deserialize;
use serde_json::{Value, json};

use access::{WAIT, first_denial, machines, start_replica};
use machine_class::{NS, OP_NS, class, classes, cores, create_when, machine, xlarge};
use support::{Fixture, Proc, eventually};

/// `manifests/crds.yaml` with only the Machine and NetworkConfiguration CRDs, as an older
/// release installed it.
fn crds_before_classes(dir: &Path) -> std::path::PathBuf {
    let all =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/crds.yaml"))
            .expect("CRDs");
    let older: Vec<String> = serde_yaml::Deserializer::from_str(&all)
        .map(|doc| Value::deserialize(doc).expect("YAML"))
        // Before classes, and before snapshots and restores (issue 21), which it also lacked.
        .filter(|crd| {
            let kind = &crd["spec"]["names"]["kind"];
            kind == "Machine" || kind == "NetworkConfiguration"
        })
        .map(|crd| serde_yaml::to_string(&crd).expect("YAML"))
        .collect();
    assert_eq!(older.len(), 2, "Machine and NetworkConfiguration");
    let path = dir.join("crds-before-classes.yaml");
    std::fs::write(&path, older.join("---\n")).expect("write");
    path
}

async fn readyz(port: u16) -> Option<(u16, String)> {
    let resp = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/readyz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.text().await.ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_class_crd_the_built_ins_then_classes_once_it_is_applied() {
    let older = tempfile::tempdir().expect("a directory for the older CRDs");
    let env = Fixture::new()
        .with_fixture_crds()
        .with_crds([crds_before_classes(older.path())])
        .namespace(OP_NS)
        .namespace(NS)
        .start()
        .await;
    let admin = env.admin_client().await;
    let (op, _) = start_replica(&env, OP_NS, "upgraded", &[]).await;
    let api = machines(&admin, NS);

    let huge = machine("huge", json!({"template": "huge"}));
    let denied = first_denial(&api, &PostParams::default(), &huge, &op).await;
    assert!(
        denied.contains(r#"supported values: "large", "medium", "small""#),
        "{denied}"
    );
    let small = api
        .create(
            &PostParams::default(),
            &machine("small", json!({"template": "small"})),
        )
        .await
        .expect("a built-in class without the MachineClass CRD");
    assert_eq!(cores(&small), Some(1));

    // The CRD applied later: no restart, the class is in force once the watch retries.
    env.install_crds(&[support::machine_crds()])
        .await
        .expect("the MachineClass CRD");
    eventually(WAIT, "a class created", || async {
        let xl = class("xlarge", xlarge(4, "48Gi", "100Gi"));
        classes(&admin)
            .create(&PostParams::default(), &xl)
            .await
            .ok()
    })
    .await;
    let unknown = |m: &str| m.contains(r#"Unsupported value: "xlarge""#);
    let db = create_when(&api, &machine("db", json!({"template": "xlarge"})), unknown).await;
    assert_eq!(cores(&db), Some(4));
    drop(op);
}

#[tokio::test]
async fn a_replica_that_cannot_read_machine_classes_is_not_ready() {
    let cp = Fixture::new()
        .with_machine_crds()
        // A user with no rights at all: nothing can be read, MachineClasses included.
        .user("no-class-rights", &[])
        .shared()
        .await;
    let nobody = cp.user("no-class-rights");
    let kubeconfig = cp.write_kubeconfig(nobody, None).expect("kubeconfig");
    let [webhook, probes] = [(); 2].map(|()| support::free_port().expect("port"));
    let dir = cp.dir().join("no-class-rights");
    std::fs::create_dir_all(&dir).expect("dir");
    let args: Vec<OsString> = [
        "run",
        "--kubeconfig",
        kubeconfig.to_str().expect("utf-8"),
        "--namespace",
        "no-class-rights",
        "--leader-election",
        "false",
        "--listen",
        &format!("127.0.0.1:{webhook}"),
        "--metrics-bind-address",
        "127.0.0.1:0",
        "--health-probe-bind-address",
        &format!("127.0.0.1:{probes}"),
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let op = Proc::spawn(
        "kubevirt-operator",
        Path::new(env!("CARGO_BIN_EXE_kubevirt-operator")),
        args,
        dir.join("operator.log"),
    )
    .expect("spawn");
    // Several reads in a row, well after start: never ready, and the class list named.
    let body = eventually(WAIT, "/readyz", || readyz(probes)).await;
    for _ in 0..5 {
        let (status, text) = readyz(probes).await.unwrap_or((0, body.1.clone()));
        assert_eq!(status, 500, "{text}");
        assert!(text.contains("MachineClasses read"), "{text}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Said in the log too, once the watch's failure is logged (later than /readyz on a busy
    // machine: waited for).
    support::eventually_with(
        WAIT,
        "the failed MachineClass watch in the log",
        || op.log_tail(200),
        || async {
            op.log_tail(200)
                .contains("watching MachineClasses failed")
                .then_some(())
        },
    )
    .await;
    drop(op);
}
