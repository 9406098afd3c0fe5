//! End-to-end checks of the test control plane itself (tests/support), against real etcd and
//! kube-apiserver processes.

mod support;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;
use support::{ControlPlane, OPERATOR_NAMESPACE, crd_fixtures};

fn vm_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
        "virtualmachines",
    )
}

fn api_error(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error status, got {other:?}"),
    }
}

fn listening(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_ok()
}

#[tokio::test]
async fn api_server_is_up_and_reports_v1_20_2() {
    let cp = ControlPlane::shared()
        .await
        .expect("shared control plane starts");
    let client = cp.client().await.expect("admin client");
    let version = client.apiserver_version().await.expect("GET /version");
    assert_eq!(version.git_version, "v1.20.2");
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "20")
    );

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    namespaces
        .get(OPERATOR_NAMESPACE)
        .await
        .expect("the operator namespace is created at start-up");

    // The Go client reads the same kubeconfig file: kubectl sees the same server version.
    let out = cp
        .kubectl()
        .expect("kubectl is provided with the assets")
        .args(["version", "-o", "json"])
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl version failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let versions: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("kubectl version json");
    assert_eq!(versions["serverVersion"]["gitVersion"], "v1.20.2");
    assert_eq!(versions["clientVersion"]["gitVersion"], "v1.20.2");
    eprintln!("shared control plane start-up: {:?}", cp.startup());
}

#[tokio::test]
async fn kubevirt_schema_rejects_invalid_and_accepts_valid_virtual_machines() {
    let cp = ControlPlane::shared()
        .await
        .expect("shared control plane starts");
    let installed = cp
        .install_crds(&crd_fixtures().expect("list CRD fixtures"))
        .await
        .expect("install the fixture CRDs");
    for name in [
        "virtualmachines.kubevirt.io",
        "virtualmachineinstances.kubevirt.io",
        "network-attachment-definitions.k8s.cni.cncf.io",
    ] {
        assert!(
            installed.iter().any(|n| n == name),
            "{name} not installed: {installed:?}"
        );
    }
    let ns = cp.namespace("kubevirt-schema").await.expect("namespace");
    let vms: Api<DynamicObject> =
        Api::namespaced_with(cp.client().await.expect("client"), &ns, &vm_resource());

    let vm = |name: &str, cores: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": { "name": name },
            "spec": {
                "runStrategy": "Halted",
                "template": { "spec": { "domain": {
                    "cpu": { "cores": cores },
                    "memory": { "guest": "1Gi" },
                    "devices": {},
                } } },
            },
        }))
        .expect("VirtualMachine object")
    };

    let err = vms
        .create(&PostParams::default(), &vm("invalid", json!("four")))
        .await
        .expect_err("the API server must reject cores: \"four\"");
    let status = api_error(err);
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.template.spec.domain.cpu.cores"),
        "message should name the field: {}",
        status.message
    );

    vms.create(&PostParams::default(), &vm("valid", json!(4)))
        .await
        .expect("a minimal valid VirtualMachine is accepted");
    let stored = vms.get("valid").await.expect("read it back");
    assert_eq!(
        stored.data["spec"]["template"]["spec"]["domain"]["cpu"]["cores"],
        4
    );

    // The Multus CRD enforces its one field too.
    let nads: Api<DynamicObject> = Api::namespaced_with(
        cp.client().await.expect("client"),
        &ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition"),
            "network-attachment-definitions",
        ),
    );
    let nad = |config: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": { "name": "br-vlan10" },
            "spec": { "config": config },
        }))
        .expect("NetworkAttachmentDefinition object")
    };
    let status = api_error(
        nads.create(&PostParams::default(), &nad(json!({ "type": "bridge" })))
            .await
            .expect_err("spec.config must be a string"),
    );
    assert_eq!(status.code, 422, "{status:?}");
    nads.create(
        &PostParams::default(),
        &nad(json!(
            r#"{"cniVersion":"0.3.1","type":"bridge","bridge":"br0","vlan":10}"#
        )),
    )
    .await
    .expect("a NetworkAttachmentDefinition with a string config is accepted");
}

async fn eventually_ok<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    // RBAC changes reach the authorizer through an informer: allow a moment.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match f().await {
            Ok(value) => return value,
            Err(e) if Instant::now() > deadline => panic!("{what}: still failing after 15s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test]
async fn minted_user_is_forbidden_until_rbac_grants_access() {
    let cp = ControlPlane::shared()
        .await
        .expect("shared control plane starts");
    let ns = cp.namespace("rbac").await.expect("namespace");
    let user_name = format!("alice-{ns}");
    let user = cp
        .mint_user(&user_name, &["team-a", "team-b"])
        .expect("mint a client certificate");
    let alice: Client = cp
        .client_for(&user)
        .await
        .expect("client for the minted user");
    let admin = cp.client().await.expect("admin client");

    let configmaps: Api<ConfigMap> = Api::namespaced(alice.clone(), &ns);
    let status = api_error(
        configmaps
            .list(&ListParams::default())
            .await
            .expect_err("no RBAC yet"),
    );
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains(&user_name),
        "403 names the user: {}",
        status.message
    );

    // One Role per resource, bound to the user, the first group and the second group: each
    // binding must take effect on its own, proving the CN and both O values authenticate.
    for (resource, kind, subject) in [
        ("configmaps", "User", user_name.as_str()),
        ("secrets", "Group", "team-a"),
        ("pods", "Group", "team-b"),
    ] {
        let role: Role = serde_json::from_value(json!({
            "metadata": { "name": format!("read-{resource}") },
            "rules": [{ "apiGroups": [""], "resources": [resource], "verbs": ["get", "list"] }],
        }))
        .expect("Role");
        Api::<Role>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &role)
            .await
            .expect("create Role");
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": { "name": format!("read-{resource}") },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("read-{resource}") },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject }],
        }))
        .expect("RoleBinding");
        Api::<RoleBinding>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &binding)
            .await
            .expect("create RoleBinding");
    }
    let secrets: Api<Secret> = Api::namespaced(alice.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(alice.clone(), &ns);
    let lp = ListParams::default();
    eventually_ok("list configmaps (bound to the user)", || {
        configmaps.list(&lp)
    })
    .await;
    eventually_ok("list secrets (bound to the first group)", || {
        secrets.list(&lp)
    })
    .await;
    eventually_ok("list pods (bound to the second group)", || pods.list(&lp)).await;

    // The grant is namespaced: other namespaces stay forbidden.
    let elsewhere: Api<ConfigMap> = Api::namespaced(alice, "default");
    let status = api_error(
        elsewhere
            .list(&ListParams::default())
            .await
            .expect_err("no RBAC in default"),
    );
    assert_eq!(status.code, 403, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_instance_gives_parallel_tests_distinct_namespaces() {
    let cp = ControlPlane::shared()
        .await
        .expect("shared control plane starts");
    let again = ControlPlane::shared().await.expect("shared control plane");
    assert!(
        std::ptr::eq(cp, again),
        "shared() must return the one instance"
    );

    let tasks: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move {
                let cp = ControlPlane::shared().await.expect("shared control plane");
                let ns = cp.namespace("parallel").await.expect("namespace");
                let cms: Api<ConfigMap> = Api::namespaced(cp.client().await.expect("client"), &ns);
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": { "name": "marker" }, "data": { "task": i.to_string() },
                }))
                .expect("ConfigMap");
                cms.create(&PostParams::default(), &cm)
                    .await
                    .expect("create marker");
                (ns, i)
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(task.await.expect("task"));
    }
    let mut names: Vec<&str> = seen.iter().map(|(ns, _)| ns.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 8, "namespaces must be distinct: {seen:?}");

    // Each namespace holds exactly its own task's object.
    let client = cp.client().await.expect("client");
    for (ns, i) in &seen {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let list = cms.list(&ListParams::default()).await.expect("list");
        let tasks: Vec<_> = list
            .items
            .iter()
            .filter_map(|cm| cm.data.as_ref()?.get("task").cloned())
            .collect();
        assert_eq!(tasks, vec![i.to_string()], "namespace {ns}");
    }
}

/// What a dropped instance must leave behind: nothing listening, no directory.
fn assert_torn_down(what: &str, dir: &Path, ports: support::Ports, pids: &[u32]) {
    assert!(!dir.exists(), "{what}: {} still exists", dir.display());
    assert!(
        !listening(ports.apiserver),
        "{what}: API server port {} still open",
        ports.apiserver
    );
    assert!(
        !listening(ports.etcd_client),
        "{what}: etcd port {} still open",
        ports.etcd_client
    );
    for pid in pids {
        assert!(
            !support::process_alive(*pid),
            "{what}: process {pid} still running"
        );
    }
}

#[tokio::test]
async fn dedicated_instance_tears_down_on_drop() {
    let cp = ControlPlane::start()
        .await
        .expect("dedicated control plane starts");
    eprintln!("dedicated control plane start-up: {:?}", cp.startup());
    let (dir, ports, pids) = (cp.dir().to_path_buf(), cp.ports(), cp.pids());
    assert!(dir.join("admin.kubeconfig").is_file());
    assert!(listening(ports.apiserver) && listening(ports.etcd_client));
    let ns = cp.namespace("dedicated").await.expect("namespace");
    assert!(ns.starts_with("dedicated-"), "{ns}");
    drop(cp);
    assert_torn_down("after drop", &dir, ports, &pids);
}

#[test]
fn dedicated_instance_tears_down_when_its_test_panics() {
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let cp = ControlPlane::start()
                .await
                .expect("dedicated control plane starts");
            tx.send((cp.dir().to_path_buf(), cp.ports(), cp.pids()))
                .expect("send");
            panic!("deliberate panic while the control plane is alive");
        })
    })
    .join();
    assert!(outcome.is_err(), "the thread was meant to panic");
    let (dir, ports, pids) = rx
        .recv()
        .expect("the control plane started before the panic");
    assert_torn_down("after panic", &dir, ports, &pids);
}

#[test]
fn missing_binaries_fail_with_instructions() {
    let err = support::binary("no-such-control-plane-binary").expect_err("must not be found");
    let message = format!("{err:#}");
    assert!(
        message.contains("no-such-control-plane-binary not found"),
        "{message}"
    );
    assert!(
        message.contains("make test") && message.contains("scripts/envtest-assets.sh"),
        "{message}"
    );
}

/// The child processes are `examples/shared_control_plane_child.rs`, which cargo builds
/// next to the test binaries.
fn child_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let debug_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let child = debug_dir
        .join("examples")
        .join("shared_control_plane_child");
    assert!(
        child.exists(),
        "{} is missing: cargo test builds it",
        child.display()
    );
    child
}

/// Kills the child test process if the parent test fails early.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Report {
    dir: PathBuf,
    pids: Vec<u32>,
    ports: support::Ports,
}

fn wait_for_report(
    child: &mut ChildGuard,
    report: &std::path::Path,
    log: &std::path::Path,
) -> Report {
    let deadline = Instant::now() + Duration::from_secs(180);
    while !report.exists() {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!(
                "child exited ({status}) before reporting:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "child did not report within 180s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).expect("read report"))
            .expect("report json");
    let port = |i: usize| value["ports"][i].as_u64().expect("port") as u16;
    Report {
        dir: PathBuf::from(value["dir"].as_str().expect("dir")),
        pids: value["pids"]
            .as_array()
            .expect("pids")
            .iter()
            .map(|p| p.as_u64().expect("pid") as u32)
            .collect(),
        ports: support::Ports {
            apiserver: port(0),
            etcd_client: port(1),
            etcd_peer: 0,
        },
    }
}

#[test]
fn shared_instance_dies_with_its_process() {
    // Adopt the killed child's orphans so they can be reaped here (an init that does not reap
    // would leave them as zombies). Process-wide, harmless for the other tests.
    // SAFETY: plain prctl(2).
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
    let scratch = tempfile::tempdir().expect("scratch dir");
    let spawn = |mode: &str, hold: bool| {
        let report = scratch.path().join(format!("{mode}.json"));
        let log = scratch.path().join(format!("{mode}.log"));
        let mut cmd = std::process::Command::new(child_binary());
        cmd.env("CONTROL_PLANE_REPORT", &report)
            .stdout(std::fs::File::create(&log).expect("child log"))
            .stderr(std::fs::File::create(&log).expect("child log"));
        if hold {
            cmd.env("CONTROL_PLANE_HOLD", "1");
        }
        (
            ChildGuard(cmd.spawn().expect("start child test process")),
            report,
            log,
        )
    };
    // Both children start their control planes at the same time.
    let (mut exiting, exiting_report, exiting_log) = spawn("exits", false);
    let (mut killed, killed_report, killed_log) = spawn("killed", true);

    // A normal exit: the atexit hook kills the processes and removes the directory.
    let report = wait_for_report(&mut exiting, &exiting_report, &exiting_log);
    let status = exiting.0.wait().expect("wait for child");
    assert!(
        status.success(),
        "child failed:\n{}",
        std::fs::read_to_string(&exiting_log).unwrap_or_default()
    );
    assert_torn_down(
        "after the process exited",
        &report.dir,
        report.ports,
        &report.pids,
    );

    // SIGKILL: no cleanup code runs, PDEATHSIG must take the processes down.
    let report = wait_for_report(&mut killed, &killed_report, &killed_log);
    assert!(
        report.pids.iter().all(|p| support::process_alive(*p)),
        "children run before the kill"
    );
    drop(killed); // SIGKILL + reap; its orphans are now this process's children
    // Reaping an orphan succeeds once PDEATHSIG killed it and its last thread (holding its
    // sockets) is gone. ECHILD means it was not adopted: /proc tells whether it still runs.
    let try_reap = |pid: u32| {
        // SAFETY: non-blocking waitpid(2).
        let r = unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
        r == pid as libc::pid_t || (r == -1 && !support::process_alive(pid))
    };
    let ports_open = |r: &Report| listening(r.ports.apiserver) || listening(r.ports.etcd_client);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut running = report.pids.clone();
    while (!running.is_empty() || ports_open(&report)) && Instant::now() < deadline {
        running.retain(|&pid| !try_reap(pid));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nothing could remove the directory; remove it here after checking the processes.
    let dir = report.dir.clone();
    let result = std::panic::catch_unwind(|| {
        assert!(
            running.is_empty(),
            "after SIGKILL: processes {running:?} still running"
        );
        assert!(
            !listening(report.ports.apiserver),
            "after SIGKILL: API server port still open"
        );
        assert!(
            !listening(report.ports.etcd_client),
            "after SIGKILL: etcd port still open"
        );
    });
    // (Unless another test process swept it already: its owner is dead.)
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("remove the killed child's directory");
    }
    if let Err(panic) = result {
        for &pid in &running {
            // SAFETY: kill(2) and a blocking waitpid(2) of the leaked processes being reported
            // (SIGKILL bounds the wait; ECHILD returns at once).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn directories_of_dead_test_processes_are_swept() {
    let mut exited = std::process::Command::new("true")
        .spawn()
        .expect("run true");
    exited.wait().expect("wait for true");
    let make = |owner: u32| {
        let dir = tempfile::Builder::new()
            .prefix("kubevirt-operator-cp-sweep-test-")
            .tempdir()
            .expect("temp dir")
            .keep();
        std::fs::write(dir.join("owner.pid"), owner.to_string()).expect("owner.pid");
        dir
    };
    let stale = make(exited.id());
    let live = make(std::process::id());
    // (Another test process starting up may sweep `stale` first; either way it must go.)
    let removed = support::sweep_stale_dirs();
    let live_survived = live.exists();
    std::fs::remove_dir_all(&live).expect("remove the live directory");
    assert!(!stale.exists(), "stale directory not swept: {removed:?}");
    assert!(live_survived, "the directory of a live process was removed");
}

#[tokio::test]
async fn the_audit_log_names_each_callers_requests() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.namespace("audit").await.expect("namespace");
    let user = cp.mint_user("audited-user", &[]).expect("user");
    let client = cp.client_for(&user).await.expect("client");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, &ns);
    let denied = pods
        .list(&Default::default())
        .await
        .expect_err("no RBAC yet");
    assert!(format!("{denied}").contains("forbidden"), "{denied}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = cp
            .audited_requests()
            .expect("audit log")
            .into_iter()
            .any(|r| {
                r.user == "audited-user"
                    && r.verb == "list"
                    && r.resource == "pods"
                    && r.namespace == ns
                    && r.code == 403
            });
        if seen {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the denied list never reached the audit log"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
