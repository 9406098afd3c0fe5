//! Many clusters (`--clusters 10x1000`): one operator serving C remote control planes with M
//! Machines each, placed by the `vitistack.io/kubevirt-config` annotation (`dc0` .. `dc{C-1}`).
//! Its convergence time is read against the write floor for the same clients (each remote
//! cluster its own client and rate limit, the statuses through the management cluster's), and
//! its peak RSS once converged.
//!
//! The floor runs first, on control planes of its own (C remotes and a management one holding
//! the same Machines, stored as written); then the operator's run gets fresh ones, its Machines
//! created through its mutating webhook as in the other runs.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::future::try_join_all;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use kubevirt_operator::api::names::KUBEVIRT_CONFIG_ANNOTATION;
use kubevirt_operator::api::{KubevirtConfig, Machine};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;

use super::floor::write_all;
use super::measure::proc_status;
use super::replica::run_argv;
use super::support::{self, ControlPlane, Proc};
use super::{
    Args, Placed, control_plane, create_admitted_machines, create_machines, wait_converged,
};

/// C clusters of M Machines each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub clusters: usize,
    pub per_cluster: usize,
}

impl Shape {
    /// `10x1000`.
    pub fn parse(s: &str) -> Result<Shape> {
        let (c, m) = s.split_once('x').with_context(|| {
            format!("--clusters {s:?}: expected CLUSTERSxMACHINES, e.g. 10x1000")
        })?;
        let shape = Shape {
            clusters: c.trim().parse().context("--clusters: the cluster count")?,
            per_cluster: m
                .trim()
                .parse()
                .context("--clusters: Machines per cluster")?,
        };
        if shape.clusters == 0 {
            bail!("--clusters {s:?}: at least one remote cluster");
        }
        Ok(shape)
    }

    pub fn machines(self) -> usize {
        self.clusters * self.per_cluster
    }
}

/// The KubevirtConfig Machine `i` is placed on (round robin, so every cluster gets M).
pub fn cluster_of(i: usize, clusters: usize) -> String {
    format!("dc{}", i % clusters)
}

/// C control planes with KubeVirt's and CDI's CRDs (started concurrently), registered on
/// `admin` as the KubevirtConfigs `dc0` .. with their admin kubeconfigs.
async fn remotes(admin: &Client, clusters: usize) -> Result<Vec<ControlPlane>> {
    let crds = support::crd_fixtures()?;
    let started = try_join_all((0..clusters).map(|_| async {
        let remote = ControlPlane::start().await?;
        remote.install_crds(&crds).await?;
        anyhow::Ok(remote)
    }))
    .await?;
    for (i, remote) in started.iter().enumerate() {
        register(admin, &cluster_of(i, clusters), remote).await?;
    }
    Ok(started)
}

async fn register(admin: &Client, name: &str, remote: &ControlPlane) -> Result<()> {
    let secret_name = format!("{name}-kubeconfig");
    let kubeconfig = remote.kubeconfig_yaml(remote.admin(), None)?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": secret_name},
        "stringData": {"kubeconfig": kubeconfig},
    }))?;
    Api::<Secret>::namespaced(admin.clone(), support::OPERATOR_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await?;
    let config: KubevirtConfig = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": {"name": name},
        "spec": {"kubeconfigSecretRef": secret_name, "secretNamespace": support::OPERATOR_NAMESPACE},
    }))?;
    Api::<KubevirtConfig>::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await?;
    Ok(())
}

/// The floor: every Machine's claims and VM written on its cluster by a client like the
/// operator's for that cluster, its status on the management cluster by one like the
/// operator's own.
async fn floor(args: &Args, shape: Shape) -> Result<Duration> {
    let (cp, admin, ns) = control_plane().await?;
    let remotes = remotes(&admin, shape.clusters).await?;
    create_machines(&admin, &ns, shape.machines(), shape.clusters).await?;
    let status = client_like_operator(&cp, args).await?;
    let mut clients = Vec::new();
    for remote in &remotes {
        support::create_namespace(&remote.client().await?, &ns).await?;
        clients.push(client_like_operator(remote, args).await?);
    }
    let machines = Api::<Machine>::namespaced(admin.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let placed = machines.into_iter().map(|m| {
        let i = m
            .annotations()
            .get(KUBEVIRT_CONFIG_ANNOTATION)
            .and_then(|c| c.strip_prefix("dc"))
            .and_then(|i| i.parse::<usize>().ok())
            .unwrap_or(0);
        (m, clients[i].clone())
    });
    let started = Instant::now();
    write_all(placed, &status, &ns).await?;
    let took = started.elapsed();
    drop(remotes);
    drop(cp);
    Ok(took)
}

async fn client_like_operator(cp: &ControlPlane, args: &Args) -> Result<Client> {
    kubevirt_operator::client::client(Some(cp.admin_kubeconfig()), args.qps, args.burst).await
}

/// The operator's run: time to converge every Machine, its peak RSS, and the VMs on each
/// cluster checked.
async fn operator(args: &Args, shape: Shape) -> Result<(Duration, u64)> {
    let n = shape.machines();
    let (cp, admin, ns) = control_plane().await?;
    let remotes = remotes(&admin, shape.clusters).await?;
    let dir = cp.dir().join("bench-operator");
    std::fs::create_dir_all(&dir)?;
    let port = support::free_port()?;
    let placed = Placed {
        n,
        clusters: shape.clusters,
    };
    create_admitted_machines(args, &cp, &admin, &ns, placed, port, &dir).await?;
    let mut op = Proc::spawn(
        "kubevirt-operator",
        &args.operator,
        run_argv(&cp, port, args.qps, args.burst),
        dir.join("operator.log"),
    )?;
    let took = wait_converged(&admin, &ns, n, &mut op).await?;
    for (i, remote) in remotes.iter().enumerate() {
        let vms = Api::<VirtualMachine>::namespaced(remote.client().await?, &ns)
            .list_metadata(&ListParams::default())
            .await?
            .items
            .len();
        if vms != shape.per_cluster {
            bail!("{vms} VMs on dc{i} for {} Machines", shape.per_cluster);
        }
    }
    // A few resyncs and probes pass, so the peak includes steady state.
    tokio::time::sleep(Duration::from_secs(35)).await;
    let peak_rss_kib = proc_status(op.pid(), "VmHWM:").unwrap_or(0);
    op.kill();
    drop(remotes);
    drop(cp);
    Ok((took, peak_rss_kib))
}

/// The report line of one shape.
pub async fn run(args: &Args, shape: Shape) -> Result<String> {
    eprintln!(
        "many clusters, {} x {} Machines: floor",
        shape.clusters, shape.per_cluster
    );
    let f = floor(args, shape).await?;
    eprintln!("  floor {f:.2?}; operator");
    let (took, rss_kib) = operator(args, shape).await?;
    Ok(format!(
        "clusters {}x{} (QPS {}/{}): operator {:>8.2?}  floor {:>8.2?}  ratio {:.2}  peak RSS {:.1} MiB",
        shape.clusters,
        shape.per_cluster,
        args.qps,
        args.burst,
        took,
        f,
        took.as_secs_f64() / f.as_secs_f64(),
        rss_kib as f64 / 1024.0
    ))
}
