//! Teardown: on drop, on panic, with the test process; stale directories swept.

use crate::support::ControlPlane;
#[allow(unused_imports)]
use crate::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
