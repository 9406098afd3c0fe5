//! etcd + kube-apiserver on loopback, in a temporary directory, torn down on drop.
//!
//! By default there is no controller-manager, scheduler or kubelet: no garbage collection of
//! owned objects, deleted namespaces stay Terminating, no pods run. Tests check what the operator
//! writes. [`ControlPlane::start_controller_manager`] adds Kubernetes' own garbage collector
//! and namespace controller, for tests where owner-reference cascades or namespace deletion
//! matter (they cost about a second of start-up and some CPU, so only those tests pay). Tests set
//! up through [`super::Fixture`].
//!
//! For outage tests, kube-apiserver can be stopped and started again on the same address, a
//! second one can run on the same etcd, and etcd's history can be compacted.
//!
//! [`ControlPlane::start_with`] adds kube-apiserver flags, and the files they name, to a
//! dedicated control plane (e.g. an AdmissionConfiguration): [`super::ApiserverExtras`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use tempfile::TempDir;

use super::apiserver::{APISERVER, Instance, TOKENS, apiserver_args, wait_for_apiserver};
use super::apiserver_extras::ApiserverExtras;
use super::assets::binary;
use super::audit::{AUDIT_LOG, AUDIT_POLICY, AUDIT_POLICY_YAML};
use super::etcd::{etcd_args, wait_for_etcd};
use super::kubeconfig::{client_from_kubeconfig, kubeconfig_yaml};
use super::pki::{Pki, User};
use super::ports::free_port;
use super::process::{Proc, cleanup_at_exit, forget_at_exit};

/// The operator's default namespace (SPEC "Names"), created in every control plane.
pub const OPERATOR_NAMESPACE: &str = "kubevirt-operator-system";

/// Generous: a 2-core machine may be busy compiling while tests start control planes.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(120);
pub(super) const LOG_LINES: usize = 40;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

const DIR_PREFIX: &str = "kubevirt-operator-cp-";
const OWNER_FILE: &str = "owner.pid";

/// Removes directories left by test processes that were killed (SIGKILL, Ctrl-C: no Drop, no
/// atexit); their etcd and kube-apiserver died with them (PDEATHSIG). Returns what it removed.
pub fn sweep_stale_dirs() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for path in entries.flatten().map(|e| e.path()) {
        let ours = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(DIR_PREFIX));
        let owner = std::fs::read_to_string(path.join(OWNER_FILE))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok());
        if let (true, Some(owner)) = (ours, owner)
            && !super::process::process_alive(owner)
            && std::fs::remove_dir_all(&path).is_ok()
        {
            removed.push(path);
        }
    }
    removed
}

#[derive(Clone, Copy, Debug)]
pub struct Ports {
    pub apiserver: u16,
    pub etcd_client: u16,
    pub etcd_peer: u16,
}

/// How long start-up took: etcd healthy, and API server `/readyz` ok (from the first spawn).
#[derive(Clone, Copy, Debug)]
pub struct Startup {
    pub etcd: Duration,
    pub total: Duration,
    /// From spawning kube-controller-manager until its controllers' caches synced, if it runs.
    pub controller_manager: Option<Duration>,
}

pub struct ControlPlane {
    pub(super) id: u64,
    // Killed in this order (API server before its etcd) by Drop, before `dir` is removed.
    pub(super) procs: Vec<Proc>,
    pub(super) dir: Option<TempDir>,
    pub(super) dir_path: PathBuf,
    pub(super) ports: Ports,
    pub(super) server: String,
    pub(super) pki: Pki,
    pub(super) admin: User,
    pub(super) admin_kubeconfig: PathBuf,
    pub(super) admin_token: String,
    pub(super) startup: Startup,
    pub(super) counter: AtomicU64,
    /// Flags added to every kube-apiserver of this control plane (restarts included).
    pub(super) extras: ApiserverExtras,
}

impl ControlPlane {
    /// A dedicated control plane for one test. Dropping it kills both processes and removes its
    /// directory (also when the test panics).
    pub async fn start() -> Result<ControlPlane> {
        Self::start_with(ApiserverExtras::default()).await
    }

    /// Like [`ControlPlane::start`], with `extras`' files written into the control plane's
    /// directory and its flags added to kube-apiserver's (a dedicated control plane only: the
    /// shared ones are started plain).
    pub async fn start_with(extras: ApiserverExtras) -> Result<ControlPlane> {
        super::init_crypto();
        let etcd = binary("etcd")?;
        let apiserver = binary("kube-apiserver")?;
        let mut attempt = 1;
        loop {
            match Self::start_once(&etcd, &apiserver, &extras).await {
                // Another process may take a port between our probe and the child's bind.
                Err(e) if attempt < 3 && format!("{e:#}").contains("address already in use") => {
                    eprintln!("control plane: port clash, retrying: {e:#}");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// One control plane for the whole test process, started by the first caller. Give each test
    /// its own namespace with [`ControlPlane::namespace`], and its own clients (clients are tied
    /// to the runtime that made them). Its processes die with the test process (PDEATHSIG) and
    /// its directory is removed at exit.
    pub async fn shared() -> Result<&'static ControlPlane> {
        static SHARED: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
        SHARED.get_or_try_init(Self::start).await
    }

    async fn start_once(
        etcd_bin: &Path,
        apiserver_bin: &Path,
        extras: &ApiserverExtras,
    ) -> Result<ControlPlane> {
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(|| {
            sweep_stale_dirs();
        });
        let dir = tempfile::Builder::new()
            .prefix(DIR_PREFIX)
            .tempdir()
            .context("creating the control plane's temporary directory")?;
        let dir_path = dir.path().to_path_buf();
        std::fs::write(dir_path.join(OWNER_FILE), std::process::id().to_string())
            .context("writing the owner pid")?;
        let pki = Pki::generate(&dir_path.join("pki"))?;
        std::fs::write(dir_path.join(AUDIT_POLICY), AUDIT_POLICY_YAML)
            .context("writing the audit policy")?;
        extras.write(&dir_path)?;
        let admin = pki.mint("kubernetes-admin", &["system:masters"])?;
        let admin_token = random_hex();
        let tokens = dir_path.join(TOKENS);
        std::fs::write(
            &tokens,
            format!("{admin_token},admin-token,admin-token,\"system:masters\"\n"),
        )
        .context("writing the token file")?;
        let ports = Ports {
            apiserver: free_port()?,
            etcd_client: free_port()?,
            etcd_peer: free_port()?,
        };
        let server = format!("https://127.0.0.1:{}", ports.apiserver);
        let admin_kubeconfig = dir_path.join("admin.kubeconfig");
        // Client keys inside: owner-only, like every private key here.
        super::pki::write_private(
            &dir_path,
            "admin.kubeconfig",
            &kubeconfig_yaml(&server, &pki.ca_pem, &admin, None)?,
        )
        .context("writing the admin kubeconfig")?;

        let started = Instant::now();
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut procs = vec![Proc::spawn(
            "etcd",
            etcd_bin,
            etcd_args(&dir_path, &ports),
            dir_path.join("etcd.log"),
        )?];
        cleanup_at_exit(id, procs.iter().map(Proc::pid).collect(), dir_path.clone());
        let result = async {
            wait_for_etcd(&mut procs[0], ports.etcd_client).await?;
            let etcd_ready = started.elapsed();
            let instance = Instance {
                port: ports.apiserver,
                audit_log: &dir_path.join(AUDIT_LOG),
                cert_dir: &dir_path.join("apiserver-certs"),
            };
            procs.insert(
                0,
                Proc::spawn(
                    APISERVER,
                    apiserver_bin,
                    [
                        apiserver_args(&dir_path, &ports, &pki, &tokens, &instance),
                        extras.args(&dir_path),
                    ]
                    .concat(),
                    dir_path.join("kube-apiserver.log"),
                )?,
            );
            cleanup_at_exit(id, procs.iter().map(Proc::pid).collect(), dir_path.clone());
            let client = client_from_kubeconfig(&admin_kubeconfig).await?;
            wait_for_apiserver(&client, &mut procs).await?;
            let startup = Startup {
                etcd: etcd_ready,
                total: started.elapsed(),
                controller_manager: None,
            };
            create_namespace(&client, OPERATOR_NAMESPACE).await?;
            Ok::<_, anyhow::Error>(startup)
        }
        .await;
        let startup = match result {
            Ok(startup) => startup,
            Err(e) => {
                drop(procs); // Proc::drop kills each one
                forget_at_exit(id);
                // Keep the logs (not etcd's data) for the failure the error message describes.
                let _ = std::fs::remove_dir_all(dir_path.join("etcd"));
                let kept = dir.keep();
                return Err(e.context(format!(
                    "control plane start-up failed; logs kept in {}",
                    kept.display()
                )));
            }
        };
        Ok(ControlPlane {
            id,
            procs,
            dir: Some(dir),
            dir_path,
            ports,
            server,
            pki,
            admin,
            admin_kubeconfig,
            admin_token,
            startup,
            counter: AtomicU64::new(0),
            extras: extras.clone(),
        })
    }

    /// Creates a namespace named `<prefix>-<n>`, unique within this control plane.
    pub async fn namespace(&self, prefix: &str) -> Result<String> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{n}", sanitize(prefix));
        create_namespace(&self.client().await?, &name).await?;
        Ok(name)
    }

    /// Installs CustomResourceDefinition YAML files and waits until each is Established and
    /// served. Returns the CRD names. Idempotent, so parallel tests may install the same files.
    pub async fn install_crds<P: AsRef<Path>>(&self, paths: &[P]) -> Result<Vec<String>> {
        super::crds::install(&self.client().await?, paths).await
    }

    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// PEM of the CA that signed the API server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    pub fn ports(&self) -> Ports {
        self.ports
    }

    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    /// Process ids of kube-apiserver and etcd (and kube-controller-manager when it runs).
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(Proc::pid).collect()
    }

    pub fn startup(&self) -> Startup {
        self.startup
    }
    /// The tail of both processes' logs, for failure messages.
    pub fn logs(&self) -> String {
        self.procs
            .iter()
            .map(|p| p.log_tail(LOG_LINES))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        forget_at_exit(self.id);
        for proc in &mut self.procs {
            proc.kill();
        }
        if let Some(dir) = self.dir.take()
            && let Err(e) = dir.close()
        {
            eprintln!(
                "control plane: could not remove {}: {e}",
                self.dir_path.display()
            );
        }
    }
}

pub(super) fn exited_error(proc: &mut Proc) -> Result<()> {
    match proc.exited() {
        Some(status) => Err(anyhow!(
            "{} exited during start-up ({status})\n{}",
            proc.name,
            proc.log_tail(LOG_LINES)
        )),
        None => Ok(()),
    }
}

/// Labelled with its name as kube-apiserver 1.21+ does (this 1.20 one does not), so that the
/// operator's webhooks, which select watched namespaces by that label, are called here.
pub async fn create_namespace(client: &Client, name: &str) -> Result<()> {
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": {
            "app.kubernetes.io/created-by": "control-plane-tests",
            "kubernetes.io/metadata.name": name,
        } }
    }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(())
}

/// A DNS-1123 label fragment: lowercase alphanumerics and '-', at most 50 characters.
pub(super) fn sanitize(prefix: &str) -> String {
    let cleaned: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(50)
        .collect();
    let trimmed = cleaned.trim_matches('-');
    if trimmed.is_empty() {
        "test".to_string()
    } else {
        trimmed.to_string()
    }
}

/// 128 random bits as hex, from std's randomly keyed hasher (enough for a local test token).
fn random_hex() -> String {
    use std::hash::{BuildHasher, Hasher};
    let word = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt ^ u64::from(std::process::id()));
        h.finish()
    };
    format!("{:016x}{:016x}", word(1), word(2))
}
