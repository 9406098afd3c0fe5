//! How the reconciler benchmark starts the operator: `run` as `make dev` runs it, one replica
//! among several (its own listener, metrics address and identity), and the `webhook` command
//! serving the operator's own certificate at the URL the webhook configurations name.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::support::{self, ControlPlane, Proc};

/// `kubevirt-operator run` with self-managed certificates, its webhooks registered with
/// `--webhook-url https://127.0.0.1:<port>` as `make dev` runs it.
pub fn run_argv(cp: &ControlPlane, port: u16, qps: f64, burst: u32) -> Vec<OsString> {
    let url = format!("https://127.0.0.1:{port}");
    vec![
        "--log-format".into(),
        "json".into(),
        "run".into(),
        "--kubeconfig".into(),
        cp.admin_kubeconfig().into(),
        "--namespace".into(),
        support::OPERATOR_NAMESPACE.into(),
        "--webhook-url".into(),
        url.into(),
        "--listen".into(),
        format!("127.0.0.1:{port}").into(),
        "--metrics-bind-address".into(),
        "127.0.0.1:0".into(),
        "--health-probe-bind-address".into(),
        "127.0.0.1:0".into(),
        "--kube-api-qps".into(),
        qps.to_string().into(),
        "--kube-api-burst".into(),
        burst.to_string().into(),
    ]
}

/// The `webhook` command serving `dir/tls.{crt,key}` (the operator's serving certificate) on
/// `port`, the URL the webhook configurations name.
pub fn webhook_server(operator: &Path, dir: &Path, port: u16) -> Result<Proc> {
    let argv: Vec<OsString> = vec![
        "webhook".into(),
        "--cert-file".into(),
        dir.join("tls.crt").into(),
        "--key-file".into(),
        dir.join("tls.key").into(),
        "--listen".into(),
        format!("127.0.0.1:{port}").into(),
        // Its metrics and probes on loopback too (their defaults listen on every address).
        "--metrics-bind-address".into(),
        "127.0.0.1:0".into(),
        "--health-probe-bind-address".into(),
        "127.0.0.1:0".into(),
    ];
    Proc::spawn(
        "kubevirt-operator webhook",
        operator,
        argv,
        dir.join(format!("webhook-{port}.log")),
    )
}

/// One replica of `run` (leader election on, as by default) named `identity`: the webhook
/// configurations name `webhook_port`, where [`webhook_server`] answers, so the API server's
/// admissions do not depend on which replica lives; its own listener, and metrics on
/// `metrics_port`.
pub struct Replica {
    pub proc: Proc,
    pub metrics_port: u16,
}

pub fn replica(
    operator: &Path,
    cp: &ControlPlane,
    identity: &str,
    webhook_port: u16,
    qps: f64,
    burst: u32,
) -> Result<Replica> {
    let mut argv = run_argv(cp, webhook_port, qps, burst);
    let metrics_port = support::free_port()?;
    let set = |argv: &mut Vec<OsString>, flag: &str, value: String| {
        if let Some(i) = argv.iter().position(|a| a == flag) {
            argv[i + 1] = value.into();
        }
    };
    set(
        &mut argv,
        "--listen",
        format!("127.0.0.1:{}", support::free_port()?),
    );
    set(
        &mut argv,
        "--metrics-bind-address",
        format!("127.0.0.1:{metrics_port}"),
    );
    argv.extend(["--identity".into(), identity.into()]);
    let dir = cp.dir().join("bench-operator");
    std::fs::create_dir_all(&dir)?;
    let proc = Proc::spawn(
        "kubevirt-operator",
        operator,
        argv,
        dir.join(format!("operator-{identity}.log")),
    )?;
    Ok(Replica { proc, metrics_port })
}

impl Replica {
    /// Reconciles this replica has finished, from its own metrics.
    pub async fn reconciles(&self) -> Result<u64> {
        let text = reqwest::get(format!("http://127.0.0.1:{}/metrics", self.metrics_port))
            .await?
            .text()
            .await?;
        Ok(text
            .lines()
            .filter(|l| l.starts_with("kubevirt_operator_reconciliation_duration_seconds_count"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64)
    }

    /// Waits until this replica has reconciled at least `n` times (its first pass over `n`
    /// Machines, once it leads).
    pub async fn wait_reconciles(&mut self, n: u64, within: Duration) -> Result<Duration> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.proc.exited() {
                bail!("operator exited ({status})\n{}", self.proc.log_tail(30));
            }
            let done = self.reconciles().await.unwrap_or(0);
            if done >= n {
                return Ok(started.elapsed());
            }
            if started.elapsed() > within {
                bail!(
                    "{done} of {n} reconciles after {within:?}\n{}",
                    self.proc.log_tail(30)
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits until the log says `what` (a replica's "waiting for leadership").
    pub async fn wait_logged(&mut self, what: &str, within: Duration) -> Result<()> {
        let started = Instant::now();
        loop {
            if std::fs::read_to_string(&self.proc.log).is_ok_and(|l| l.contains(what)) {
                return Ok(());
            }
            if let Some(status) = self.proc.exited() {
                bail!("operator exited ({status})\n{}", self.proc.log_tail(30));
            }
            if started.elapsed() > within {
                bail!("no {what:?} after {within:?}\n{}", self.proc.log_tail(30));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
