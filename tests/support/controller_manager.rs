//! Kubernetes' own kube-controller-manager (v1.20.2, like kube-apiserver) with only the garbage
//! collector and the namespace controller: owner-reference cascades (foreground, background,
//! orphan) and namespace deletion in the tests are Kubernetes' own, not simulated.
//!
//! Loopback only: it serves nothing (`--port=0 --secure-port=0`), talks to kube-apiserver with
//! a client certificate from the control plane's PKI, and runs without leader election.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::assets::binary;
use super::process::{Proc, cleanup_at_exit};

pub const NAME: &str = "kube-controller-manager";
/// The identity kube-controller-manager uses in a kubeadm cluster; `system:masters` stands in
/// for the bootstrap roles, which are bound to per-controller service accounts.
pub const USER: &str = "system:kube-controller-manager";
pub const GROUP: &str = "system:masters";
/// What it runs. The garbage collector is what owner references need; the namespace controller
/// empties and removes deleted namespaces.
pub const CONTROLLERS: &str = "garbagecollector,namespace";

const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Logged (klog, v0) once each controller's informers have synced: from then on the garbage
/// collector acts on every resource discovery listed when it started.
const SYNCED: [&str; 2] = [
    "Caches are synced for garbage collector",
    "Caches are synced for namespace",
];

pub fn args(kubeconfig: &Path) -> Vec<OsString> {
    [
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--controllers={CONTROLLERS}"),
        "--leader-elect=false".to_string(),
        // No listener: parallel control planes would clash on the default ports, and the tests
        // read readiness from the log instead.
        "--port=0".to_string(),
        "--secure-port=0".to_string(),
        // The default 20/30 would throttle the garbage collector behind a burst of deletions.
        "--kube-api-qps=200".to_string(),
        "--kube-api-burst=400".to_string(),
        "--profiling=false".to_string(),
        "--v=1".to_string(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

/// Waits until both controllers report synced caches (or the process exits).
pub async fn wait_ready(proc: &mut Proc) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = proc.exited() {
            bail!(
                "{NAME} exited during start-up ({status})\n{}",
                proc.log_tail(40)
            );
        }
        let log = std::fs::read_to_string(&proc.log).unwrap_or_default();
        if SYNCED.iter().all(|line| log.contains(line)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{NAME} not synced after {START_TIMEOUT:?} (waiting for {SYNCED:?})\n{}",
                proc.log_tail(40)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl super::ControlPlane {
    /// Starts kube-controller-manager against this control plane and waits until its garbage
    /// collector and namespace controller have synced. It is killed first on drop (and dies
    /// with the test process, like the others).
    pub async fn start_controller_manager(&mut self) -> Result<()> {
        if self.procs.iter().any(|p| p.name == NAME) {
            bail!("{} is already running", NAME);
        }
        let user = self.pki.mint(USER, &[GROUP])?;
        let kubeconfig = self.dir_path.join("kube-controller-manager.kubeconfig");
        std::fs::write(&kubeconfig, self.kubeconfig_yaml(&user, None)?)
            .context("writing kube-controller-manager's kubeconfig")?;
        let started = Instant::now();
        let proc = Proc::spawn(
            NAME,
            &binary(NAME)?,
            args(&kubeconfig),
            self.dir_path.join("kube-controller-manager.log"),
        )?;
        self.procs.insert(0, proc);
        cleanup_at_exit(self.id, self.pids(), self.dir_path.clone());
        wait_ready(&mut self.procs[0]).await?;
        self.startup.controller_manager = Some(started.elapsed());
        Ok(())
    }
}
