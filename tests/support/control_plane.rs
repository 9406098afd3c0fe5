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

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::apiserver_extras::ApiserverExtras;
use super::assets::{binary, kubectl_path};
use super::kubeconfig::{client_from_kubeconfig, client_from_yaml, kubeconfig_yaml};
use super::pki::{Pki, User};
use super::ports::free_port;
use super::process::{Proc, cleanup_at_exit, forget_at_exit};

/// The operator's default namespace (SPEC "Names"), created in every control plane.
pub const OPERATOR_NAMESPACE: &str = "kubevirt-operator-system";

/// Generous: a 2-core machine may be busy compiling while tests start control planes.
const START_TIMEOUT: Duration = Duration::from_secs(120);
const LOG_LINES: usize = 40;

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
    id: u64,
    // Killed in this order (API server before its etcd) by Drop, before `dir` is removed.
    procs: Vec<Proc>,
    dir: Option<TempDir>,
    dir_path: PathBuf,
    ports: Ports,
    server: String,
    pki: Pki,
    admin: User,
    admin_kubeconfig: PathBuf,
    admin_token: String,
    startup: Startup,
    counter: AtomicU64,
    /// Flags added to every kube-apiserver of this control plane (restarts included).
    extras: ApiserverExtras,
}

const APISERVER: &str = "kube-apiserver";
const TOKENS: &str = "pki/tokens.csv";
const AUDIT_POLICY: &str = "audit-policy.yaml";
const AUDIT_LOG: &str = "audit.log";
const AUDIT_POLICY_YAML: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// One API request as the audit log recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AuditedRequest {
    pub user: String,
    pub verb: String,
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub code: i64,
}

impl ControlPlane {
    /// Every request the API server has completed so far, in order.
    pub fn audited_requests(&self) -> Result<Vec<AuditedRequest>> {
        let text =
            std::fs::read_to_string(self.dir().join(AUDIT_LOG)).context("reading the audit log")?;
        let field = |v: &serde_json::Value, p: &str| {
            v.pointer(p)
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|e| {
                e["stage"] == "ResponseComplete" && e.pointer("/objectRef/resource").is_some()
            })
            .map(|e| AuditedRequest {
                user: field(&e, "/user/username"),
                verb: field(&e, "/verb"),
                api_group: field(&e, "/objectRef/apiGroup"),
                resource: field(&e, "/objectRef/resource"),
                subresource: field(&e, "/objectRef/subresource"),
                namespace: field(&e, "/objectRef/namespace"),
                name: field(&e, "/objectRef/name"),
                code: e
                    .pointer("/responseStatus/code")
                    .and_then(|c| c.as_i64())
                    .unwrap_or_default(),
            })
            .collect())
    }

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

    /// Starts kube-controller-manager against this control plane and waits until its garbage
    /// collector and namespace controller have synced. It is killed first on drop (and dies
    /// with the test process, like the others).
    pub async fn start_controller_manager(&mut self) -> Result<()> {
        use super::controller_manager as kcm;
        if self.procs.iter().any(|p| p.name == kcm::NAME) {
            bail!("{} is already running", kcm::NAME);
        }
        let user = self.pki.mint(kcm::USER, &[kcm::GROUP])?;
        let kubeconfig = self.dir_path.join("kube-controller-manager.kubeconfig");
        std::fs::write(&kubeconfig, self.kubeconfig_yaml(&user, None)?)
            .context("writing kube-controller-manager's kubeconfig")?;
        let started = Instant::now();
        let proc = Proc::spawn(
            kcm::NAME,
            &binary(kcm::NAME)?,
            kcm::args(&kubeconfig),
            self.dir_path.join("kube-controller-manager.log"),
        )?;
        self.procs.insert(0, proc);
        cleanup_at_exit(self.id, self.pids(), self.dir_path.clone());
        kcm::wait_ready(&mut self.procs[0]).await?;
        self.startup.controller_manager = Some(started.elapsed());
        Ok(())
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

    /// A new admin (system:masters) client. Make one per test: clients are tied to their runtime.
    pub async fn client(&self) -> Result<Client> {
        client_from_kubeconfig(&self.admin_kubeconfig).await
    }

    /// A client that authenticates as `user` (see [`ControlPlane::mint_user`]).
    pub async fn client_for(&self, user: &User) -> Result<Client> {
        client_from_yaml(&self.kubeconfig_yaml(user, None)?).await
    }

    /// Issues a client certificate for `name` in up to two `groups`, valid at once without
    /// restarting the API server. The user has no permissions until RBAC grants some.
    pub fn mint_user(&self, name: &str, groups: &[&str]) -> Result<User> {
        self.pki.mint(name, groups)
    }

    /// The system:masters identity behind [`ControlPlane::client`].
    pub fn admin(&self) -> &User {
        &self.admin
    }

    /// A bearer token for the same system:masters identity (for raw HTTPS clients).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Kubeconfig text for `user`, with `namespace` as the default namespace when given.
    pub fn kubeconfig_yaml(&self, user: &User, namespace: Option<&str>) -> Result<String> {
        kubeconfig_yaml(&self.server, &self.pki.ca_pem, user, namespace)
    }

    /// Writes a kubeconfig for `user` into this control plane's directory (removed with it) and
    /// returns its path, e.g. for `KUBECONFIG=` of an operator subprocess.
    pub fn write_kubeconfig(&self, user: &User, namespace: Option<&str>) -> Result<PathBuf> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir_path
            .join(format!("{}-{n}.kubeconfig", sanitize(&user.name)));
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        super::pki::write_private(
            &self.dir_path,
            name,
            &self.kubeconfig_yaml(user, namespace)?,
        )
        .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// The admin kubeconfig file.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// `kubectl --kubeconfig <admin>`, ready for more arguments.
    pub fn kubectl(&self) -> Result<Command> {
        let mut cmd = Command::new(kubectl_path()?);
        cmd.arg("--kubeconfig").arg(&self.admin_kubeconfig);
        Ok(cmd)
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

    /// Stops kube-apiserver and leaves etcd running: SIGTERM, as a restart does, and SIGKILL
    /// after 5 s (it would otherwise keep open watches waiting, delivering nothing, for up to a
    /// minute). Clients see connections refused until [`ControlPlane::start_apiserver`].
    pub fn stop_apiserver(&mut self) -> Result<()> {
        let i = self
            .procs
            .iter()
            .position(|p| p.name == APISERVER)
            .context("kube-apiserver is not running")?;
        let mut proc = self.procs.remove(i);
        proc.terminate(Duration::from_secs(5));
        cleanup_at_exit(self.id, self.pids(), self.dir_path.clone());
        Ok(())
    }

    /// Starts kube-apiserver again after [`ControlPlane::stop_apiserver`]: same address, PKI,
    /// flags and audit log (its output goes to `kube-apiserver.<n>.log`). Waits until ready.
    pub async fn start_apiserver(&mut self) -> Result<()> {
        if self.procs.iter().any(|p| p.name == APISERVER) {
            bail!("kube-apiserver is already running");
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let instance = Instance {
            port: self.ports.apiserver,
            audit_log: &self.dir_path.join(AUDIT_LOG),
            cert_dir: &self.dir_path.join("apiserver-certs"),
        };
        let proc = self.spawn_apiserver(&instance, &format!("kube-apiserver.{n}.log"))?;
        self.procs.insert(0, proc);
        cleanup_at_exit(self.id, self.pids(), self.dir_path.clone());
        let client = self.client().await?;
        wait_for_apiserver(&client, &mut self.procs).await
    }

    /// A kube-apiserver on this control plane's etcd and PKI, logging to `log` in its directory.
    fn spawn_apiserver(&self, instance: &Instance<'_>, log: &str) -> Result<Proc> {
        Proc::spawn(
            APISERVER,
            &binary(APISERVER)?,
            [
                apiserver_args(
                    &self.dir_path,
                    &self.ports,
                    &self.pki,
                    &self.dir_path.join(TOKENS),
                    instance,
                ),
                self.extras.args(&self.dir_path),
            ]
            .concat(),
            self.dir_path.join(log),
        )
    }

    /// Another kube-apiserver on the same etcd (as in an HA control plane), on its own port with
    /// its own audit log, for changes made while the main one is down. Waits until ready; stopped
    /// when dropped.
    pub async fn second_apiserver(&self) -> Result<SecondApiserver> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let port = free_port()?;
        let instance = Instance {
            port,
            audit_log: &self.dir_path.join(format!("audit.{n}.log")),
            cert_dir: &self.dir_path.join(format!("apiserver-certs.{n}")),
        };
        let proc = self.spawn_apiserver(&instance, &format!("kube-apiserver.second.{n}.log"))?;
        let server = format!("https://127.0.0.1:{port}");
        let kubeconfig = kubeconfig_yaml(&server, &self.pki.ca_pem, &self.admin, None)?;
        let mut procs = vec![proc];
        let client = client_from_yaml(&kubeconfig).await?;
        wait_for_apiserver(&client, &mut procs).await?;
        Ok(SecondApiserver {
            proc: procs.remove(0),
            kubeconfig,
        })
    }

    /// etcd's current revision (the header of a range request, through its v3 JSON gateway).
    pub async fn etcd_revision(&self) -> Result<i64> {
        // Any key will do: the header carries the store's revision.
        let header = etcd_post(self.ports.etcd_client, "/v3/kv/range", r#"{"key":"AA=="}"#).await?;
        revision_of(&header)
    }

    /// Compacts etcd's history up to its current revision (physically, so it is gone before
    /// this returns): watches from any older resourceVersion get 410 Gone. Returns the revision.
    pub async fn etcd_compact(&self) -> Result<i64> {
        let revision = self.etcd_revision().await?;
        let body = format!(r#"{{"revision":"{revision}","physical":true}}"#);
        let answer = etcd_post(self.ports.etcd_client, "/v3/kv/compaction", &body).await?;
        revision_of(&answer).with_context(|| format!("compaction at {revision}"))?;
        Ok(revision)
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

/// A second kube-apiserver (see [`ControlPlane::second_apiserver`]), stopped on drop.
pub struct SecondApiserver {
    proc: Proc,
    kubeconfig: String,
}

impl SecondApiserver {
    /// An admin (system:masters) client of this instance.
    pub async fn client(&self) -> Result<Client> {
        client_from_yaml(&self.kubeconfig).await
    }

    /// An admin (system:masters) kubeconfig of this instance.
    pub fn kubeconfig_yaml(&self) -> &str {
        &self.kubeconfig
    }

    pub fn log_tail(&self) -> String {
        self.proc.log_tail(LOG_LINES)
    }

    /// SIGTERM, then SIGKILL after 30 s.
    pub fn stop(mut self) {
        self.proc.terminate(Duration::from_secs(30));
    }
}

/// POSTs JSON to etcd's v3 gateway and returns the JSON answer (HTTP 200 only).
async fn etcd_post(port: u16, path: &str, body: &str) -> Result<serde_json::Value> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        stream.read_to_string(&mut response),
    )
    .await
    .context("etcd did not answer within 30 s")??;
    let (head, json) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("etcd {path}: no HTTP body in {response:?}"))?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("etcd {path}: {head}\n{json}");
    }
    serde_json::from_str(json).with_context(|| format!("etcd {path}: {json}"))
}

/// `header.revision` of an etcd gateway answer (a string, as int64s are in its JSON).
fn revision_of(answer: &serde_json::Value) -> Result<i64> {
    let revision = answer.pointer("/header/revision");
    revision
        .and_then(|r| match r {
            serde_json::Value::String(s) => s.parse().ok(),
            other => other.as_i64(),
        })
        .with_context(|| format!("no header.revision in {answer}"))
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

fn etcd_args(dir: &Path, ports: &Ports) -> Vec<OsString> {
    let client = format!("http://127.0.0.1:{}", ports.etcd_client);
    let peer = format!("http://127.0.0.1:{}", ports.etcd_peer);
    [
        "--name=default".to_string(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        // The peer port is set too: its default 2380 would collide between parallel instances.
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=default={peer}"),
        "--logger=zap".to_string(),
        "--log-outputs=stderr".to_string(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

/// One kube-apiserver instance's own settings; everything else is shared by every instance on
/// the same etcd.
struct Instance<'a> {
    port: u16,
    /// Appended to by each run, so a restarted instance keeps one audit trail.
    audit_log: &'a Path,
    cert_dir: &'a Path,
}

fn apiserver_args(
    dir: &Path,
    ports: &Ports,
    pki: &Pki,
    tokens: &Path,
    instance: &Instance,
) -> Vec<OsString> {
    let path = |p: &Path| p.display().to_string();
    [
        format!("--etcd-servers=http://127.0.0.1:{}", ports.etcd_client),
        format!("--cert-dir={}", instance.cert_dir.display()),
        format!("--tls-cert-file={}", path(&pki.serving_cert)),
        format!("--tls-private-key-file={}", path(&pki.serving_key)),
        format!("--client-ca-file={}", path(&pki.client_ca_cert)),
        format!("--secure-port={}", instance.port),
        "--bind-address=127.0.0.1".to_string(),
        "--advertise-address=127.0.0.1".to_string(),
        // v1.20 still opens an unauthenticated port 8080 by default; parallel instances would clash.
        "--insecure-port=0".to_string(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
        format!("--service-account-key-file={}", path(&pki.sa_public)),
        format!(
            "--service-account-signing-key-file={}",
            path(&pki.sa_private)
        ),
        format!("--token-auth-file={}", path(tokens)),
        "--authorization-mode=RBAC".to_string(),
        // Every request, at Metadata level: tests read who called which verb on what.
        format!("--audit-policy-file={}", dir.join(AUDIT_POLICY).display()),
        format!("--audit-log-path={}", instance.audit_log.display()),
        "--audit-log-format=json".to_string(),
        "--service-cluster-ip-range=10.0.0.0/24".to_string(),
        "--allow-privileged=true".to_string(),
        // There is no controller-manager: nothing creates the `default` ServiceAccounts that
        // ServiceAccount admission requires, and nothing would ever remove the pvc-protection
        // finalizer that StorageObjectInUseProtection adds (unused PVCs could not be deleted).
        "--disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection".to_string(),
        // The loopback address cannot back the `kubernetes` Service; stop retrying (and logging).
        "--endpoint-reconciler-type=none".to_string(),
        "--profiling=false".to_string(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

fn exited_error(proc: &mut Proc) -> Result<()> {
    match proc.exited() {
        Some(status) => Err(anyhow!(
            "{} exited during start-up ({status})\n{}",
            proc.name,
            proc.log_tail(LOG_LINES)
        )),
        None => Ok(()),
    }
}

async fn etcd_health(port: u16) -> Result<bool> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(response.contains("\"health\":\"true\""))
}

async fn wait_for_etcd(etcd: &mut Proc, port: u16) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        exited_error(etcd)?;
        let last = match tokio::time::timeout(Duration::from_secs(5), etcd_health(port)).await {
            Ok(Ok(true)) => return Ok(()),
            Ok(Ok(false)) => "unhealthy".to_string(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "health check timed out".to_string(),
        };
        if Instant::now() > deadline {
            bail!(
                "etcd not healthy on 127.0.0.1:{port} after {START_TIMEOUT:?} (last: {last})\n{}",
                etcd.log_tail(LOG_LINES)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn readyz(client: &Client) -> Result<String> {
    let request = http::Request::get("/readyz").body(Vec::new())?;
    Ok(tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await??)
}

async fn wait_for_apiserver(client: &Client, procs: &mut [Proc]) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        for proc in procs.iter_mut() {
            exited_error(proc)?;
        }
        let last = match readyz(client).await {
            Ok(body) if body.trim() == "ok" => return Ok(()),
            Ok(body) => body,
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() > deadline {
            let logs: Vec<String> = procs.iter().map(|p| p.log_tail(LOG_LINES)).collect();
            bail!(
                "kube-apiserver not ready after {START_TIMEOUT:?} (last /readyz: {last})\n{}",
                logs.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
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
fn sanitize(prefix: &str) -> String {
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
