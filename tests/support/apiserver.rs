//! kube-apiserver: its flags, waiting for it, and for outage tests stopping and starting it
//! again on the same address, or a second one on the same etcd.

use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::Client;

use super::assets::binary;
use super::audit::{AUDIT_LOG, AUDIT_POLICY};
use super::control_plane::{LOG_LINES, START_TIMEOUT, exited_error};
use super::kubeconfig::{client_from_yaml, kubeconfig_yaml};
use super::pki::{FRONT_PROXY_CLIENT, Pki};
use super::ports::free_port;
use super::process::{Proc, cleanup_at_exit};
use super::{ControlPlane, Ports};

pub(super) const APISERVER: &str = "kube-apiserver";
pub(super) const TOKENS: &str = "pki/tokens.csv";

impl ControlPlane {
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

/// One kube-apiserver instance's own settings; everything else is shared by every instance on
/// the same etcd.
pub(super) struct Instance<'a> {
    pub(super) port: u16,
    /// Appended to by each run, so a restarted instance keeps one audit trail.
    pub(super) audit_log: &'a Path,
    pub(super) cert_dir: &'a Path,
}

pub(super) fn apiserver_args(
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
        // The aggregation layer, as kubeadm sets it up: kube-apiserver proxies aggregated APIs
        // with its front-proxy client certificate and the user in X-Remote-* headers, and
        // publishes the CA and names in kube-system/extension-apiserver-authentication.
        format!(
            "--requestheader-client-ca-file={}",
            path(&pki.front_proxy_ca_cert)
        ),
        format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT}"),
        "--requestheader-username-headers=X-Remote-User".to_string(),
        "--requestheader-group-headers=X-Remote-Group".to_string(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_string(),
        format!(
            "--proxy-client-cert-file={}",
            path(&pki.front_proxy_client_cert)
        ),
        format!(
            "--proxy-client-key-file={}",
            path(&pki.front_proxy_client_key)
        ),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

async fn readyz(client: &Client) -> Result<String> {
    let request = http::Request::get("/readyz").body(Vec::new())?;
    Ok(tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await??)
}

pub(super) async fn wait_for_apiserver(client: &Client, procs: &mut [Proc]) -> Result<()> {
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
