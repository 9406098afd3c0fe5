//! Reconciler benchmark (`scripts/bench-reconciler.sh`): how long the operator takes to give N
//! Machines their VM, PVCs and status, next to the API server's write floor, and the operator's
//! peak memory at several Machine counts. Each measurement gets a fresh control plane.
//!
//! - floor: a client built exactly like the operator's (same QPS/burst limiter) writes the same
//!   objects for N existing Machines (PVC and VM by server-side apply, concurrently, then the
//!   status), five Machines at a time like `MAX_CONCURRENT_RECONCILES`;
//! - operator: `kubevirt-operator run` starts against N existing Machines; the clock stops when
//!   every Machine has a status naming its VM (written after its claims and VM). The Machines
//!   were created through the operator's own mutating webhook, registered as in production
//!   (`run` with self-managed certificates and `--webhook-url`), so they are stored as users'
//!   Machines are: defaulted, and carrying the cleanup finalizer;
//! - memory: the operator's peak RSS (VmHWM) once it has converged on N Machines;
//! - what a user feels (`--modes`, see `bench_reconciler/felt.rs`): apply → VM and spec change
//!   → VM latency, failover, and the idle operator's requests, with N Machines converged;
//! - many clusters (`--clusters 10x1000`, see `bench_reconciler/clusters.rs`): one operator,
//!   C remote control planes of M Machines each, against the floor, and its peak RSS.
//!
//! Usage: bench_reconciler [--machines 100,1000] [--rss 0,1000,10000] [--qps 50] [--burst 100]
//!        [--rss-qps 500] [--operator target/release/kubevirt-operator]
//!        [--modes apply,change,idle,failover] [--converged 10000] [--applies 200]
//!        [--apply-qps 50] [--idle-for 180] [--clusters 10x1000]

#[path = "../tests/support/mod.rs"]
mod support;

#[path = "bench_reconciler/clusters.rs"]
mod clusters;
#[path = "bench_reconciler/felt.rs"]
mod felt;
#[path = "bench_reconciler/floor.rs"]
mod floor;
#[path = "bench_reconciler/measure.rs"]
mod measure;
#[path = "bench_reconciler/replica.rs"]
mod replica;

use floor::floor;
use measure::{proc_status, writes, writes_per_machine};
use replica::{run_argv, webhook_server};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use kubevirt_operator::api::Machine;
use kubevirt_operator::certs::{SERVING_SECRET, TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY};
use kubevirt_operator::machine::FINALIZER;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use support::ControlPlane;

struct Args {
    machines: Vec<usize>,
    rss: Vec<usize>,
    qps: f64,
    burst: u32,
    rss_qps: f64,
    operator: PathBuf,
    felt: felt::Felt,
    clusters: Vec<clusters::Shape>,
}

fn list(s: &str) -> Result<Vec<usize>> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    s.split(',')
        .map(|n| n.trim().parse::<usize>().with_context(|| format!("{n:?}")))
        .collect()
}

fn args() -> Result<Args> {
    let mut a = Args {
        machines: vec![100, 1000],
        rss: vec![0, 1000, 10000],
        qps: 50.0,
        burst: 100,
        rss_qps: 500.0,
        operator: PathBuf::from("target/release/kubevirt-operator"),
        felt: felt::Felt::default(),
        clusters: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--machines" => a.machines = list(&value)?,
            "--rss" => a.rss = list(&value)?,
            "--qps" => a.qps = value.parse()?,
            "--burst" => a.burst = value.parse()?,
            "--rss-qps" => a.rss_qps = value.parse()?,
            "--operator" => a.operator = PathBuf::from(value),
            "--clusters" => {
                a.clusters = value
                    .split(',')
                    .map(clusters::Shape::parse)
                    .collect::<Result<_>>()?
            }
            other => a.felt.flag(other, &value)?,
        }
    }
    // Asked for latency modes or many clusters only: no convergence or memory runs unless named
    // too.
    let only = !a.felt.modes.is_empty() || !a.clusters.is_empty();
    if only && !std::env::args().any(|f| f == "--machines" || f == "--rss") {
        (a.machines, a.rss) = (Vec::new(), Vec::new());
    }
    Ok(a)
}

fn machine_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Machine>(&()))
}

/// Creates `n` medium Machines (one disk, pod network) as fast as the API server takes them;
/// with `clusters` > 0, placed round robin on the KubevirtConfigs `dc0` .. (`clusters.rs`).
async fn create_machines(client: &Client, ns: &str, n: usize, clusters: usize) -> Result<Duration> {
    let api = machine_api(client, ns);
    let started = Instant::now();
    stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let mut obj: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                    "metadata": {"name": format!("m-{i:05}")}, "spec": {"template": "medium"}
                }))?;
                if clusters > 0 {
                    obj.annotations_mut().insert(
                        kubevirt_operator::api::names::KUBEVIRT_CONFIG_ANNOTATION.to_owned(),
                        clusters::cluster_of(i, clusters),
                    );
                }
                api.create(&PostParams::default(), &obj).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(started.elapsed())
}

async fn control_plane() -> Result<(ControlPlane, Client, String)> {
    let cp = ControlPlane::start().await?;
    let mut crds = support::crd_fixtures()?;
    crds.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/crds.yaml"));
    cp.install_crds(&crds).await?;
    let client = cp.client().await?;
    let ns = cp.namespace("bench").await?;
    Ok((cp, client, ns))
}

/// A control plane holding `n` Machines stored as written (no webhook): the floor's input.
async fn fresh(n: usize) -> Result<(ControlPlane, Client, String)> {
    let (cp, client, ns) = control_plane().await?;
    let took = create_machines(&client, &ns, n, 0).await?;
    eprintln!("  created {n} Machines in {took:.2?}");
    Ok((cp, client, ns))
}

/// Waits until a dry-run Machine create comes back mutated (it carries the cleanup finalizer):
/// kube-apiserver has the mutating webhook configuration and trusts the server behind it.
async fn wait_until_admitted(client: &Client, ns: &str, server: &mut support::Proc) -> Result<()> {
    let api = machine_api(client, ns);
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": "probe"}, "spec": {"template": "medium"}
    }))?;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = server.exited() {
            bail!("{} exited ({status})\n{}", server.name, server.log_tail(30));
        }
        let last = match api.create(&dry, &probe).await {
            Ok(o) if o.finalizers().iter().any(|f| f == FINALIZER) => return Ok(()),
            Ok(_) => "stored without mutation".to_owned(),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            bail!(
                "the mutating webhook was not in force after 120 s (last: {last})\n{}",
                server.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Creates `n` Machines through the operator's mutating webhook, registered as in production,
/// while no reconciler runs: the operator registers its webhooks and certificates and stops
/// (SIGTERM: it releases its Lease), then the `webhook` command serves the operator's own
/// serving certificate at the registered URL while the Machines are created.
async fn create_admitted_machines(
    args: &Args,
    cp: &ControlPlane,
    client: &Client,
    ns: &str,
    placed: Placed,
    port: u16,
    dir: &Path,
) -> Result<()> {
    let Placed { n, clusters } = placed;
    // The webhook configurations a cluster gets from the chart, here for the URL; the operator
    // fills their caBundle.
    support::webhooks::install_for_url(
        client,
        support::OPERATOR_NAMESPACE,
        &format!("https://127.0.0.1:{port}"),
    )
    .await;
    let mut registrar = support::Proc::spawn(
        "kubevirt-operator run (registering its webhooks)",
        &args.operator,
        run_argv(cp, port, 50.0, 100),
        dir.join("register.log"),
    )?;
    wait_until_admitted(client, ns, &mut registrar).await?;
    match registrar.terminate(Duration::from_secs(20)) {
        Some(status) if status.success() => {}
        other => bail!(
            "the registering operator did not stop cleanly ({other:?})\n{}",
            registrar.log_tail(30)
        ),
    }

    let serving = Api::<Secret>::namespaced(client.clone(), support::OPERATOR_NAMESPACE)
        .get(SERVING_SECRET)
        .await?;
    let data = serving.data.unwrap_or_default();
    for (key, file) in [(TLS_CERT_KEY, "tls.crt"), (TLS_PRIVATE_KEY_KEY, "tls.key")] {
        let value = data
            .get(key)
            .with_context(|| format!("{SERVING_SECRET} has no {key}"))?;
        std::fs::write(dir.join(file), &value.0)?;
    }
    let mut server = webhook_server(&args.operator, dir, port)?;
    wait_until_admitted(client, ns, &mut server).await?;
    let took = create_machines(client, ns, n, clusters).await?;
    server.terminate(Duration::from_secs(10));
    let carrying = Api::<Machine>::namespaced(client.clone(), ns)
        .list_metadata(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|m| m.finalizers().iter().any(|f| f == FINALIZER))
        .count();
    if carrying != n {
        bail!("only {carrying} of {n} Machines were admitted with the finalizer");
    }
    eprintln!("  created {n} Machines through the mutating webhook in {took:.2?}");
    Ok(())
}

/// How many Machines, placed on how many remote clusters (0: the operator's own).
#[derive(Clone, Copy, Debug)]
struct Placed {
    n: usize,
    clusters: usize,
}

impl Placed {
    fn local(n: usize) -> Placed {
        Placed { n, clusters: 0 }
    }
}

/// Waits until every Machine has a status naming its VM; the time it took.
pub async fn wait_converged(
    admin: &Client,
    ns: &str,
    n: usize,
    op: &mut support::Proc,
) -> Result<Duration> {
    let machines = Api::<Machine>::namespaced(admin.clone(), ns);
    let started = Instant::now();
    loop {
        if let Some(status) = op.exited() {
            bail!("operator exited ({status})\n{}", op.log_tail(30));
        }
        let ready = machines
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|m| m.status.as_ref().is_some_and(|s| s.vm_name.is_some()))
            .count();
        if ready >= n {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(3600) {
            bail!(
                "only {ready} of {n} Machines converged\n{}",
                op.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(if n > 2000 { 3000 } else { 500 })).await;
    }
}

struct Run {
    took: Duration,
    peak_rss_kib: u64,
    writes: BTreeMap<String, u64>,
}

/// Starts the operator against `n` existing Machines and waits until all have a status naming
/// their VM; then checks the VMs and claims are there.
async fn operator_run(args: &Args, n: usize, qps: f64, burst: u32) -> Result<Run> {
    let (cp, admin, ns) = control_plane().await?;
    let dir = cp.dir().join("bench-operator");
    std::fs::create_dir_all(&dir)?;
    let port = support::free_port()?;
    create_admitted_machines(args, &cp, &admin, &ns, Placed::local(n), port, &dir).await?;
    let before = writes(&admin).await?;
    let mut op = support::Proc::spawn(
        "kubevirt-operator",
        &args.operator,
        run_argv(&cp, port, qps, burst),
        dir.join("operator.log"),
    )?;
    let took = wait_converged(&admin, &ns, n, &mut op).await?;
    let vms = Api::<VirtualMachine>::namespaced(admin.clone(), &ns)
        .list_metadata(&ListParams::default())
        .await?
        .items
        .len();
    let pvcs =
        Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(admin.clone(), &ns)
            .list_metadata(&ListParams::default())
            .await?
            .items
            .len();
    if vms != n || pvcs != n {
        bail!("{vms} VMs and {pvcs} PVCs for {n} Machines");
    }
    // Let a few resyncs pass, so the peak includes steady state.
    tokio::time::sleep(Duration::from_secs(if n == 0 { 10 } else { 35 })).await;
    let peak_rss_kib = proc_status(op.pid(), "VmHWM:").unwrap_or(0);
    let after = writes(&admin).await?;
    let writes = after
        .into_iter()
        .map(|(k, v)| {
            let d = v - before.get(&k).copied().unwrap_or(0);
            (k, d)
        })
        .filter(|(_, v)| *v > 0)
        .collect();
    op.kill();
    // Keep the operator's log for a look afterwards (the control plane's directory goes).
    let kept = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/bench-operator-{n}.log"));
    let _ = std::fs::copy(&op.log, &kept);
    drop(cp);
    Ok(Run {
        took,
        peak_rss_kib,
        writes,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    support::init_crypto();
    let args = args()?;
    if !args.operator.exists() {
        bail!(
            "{} not found (cargo build --release)",
            args.operator.display()
        );
    }
    let mut report = Vec::new();
    for &n in &args.machines {
        eprintln!("convergence, {n} Machines: floor");
        let f = floor(n, args.qps, args.burst).await?;
        eprintln!("  floor {f:.2?}; operator");
        let r = operator_run(&args, n, args.qps, args.burst).await?;
        eprintln!(
            "  operator {:.2?}, writes after start: {:?}",
            r.took, r.writes
        );
        report.push(format!(
            "convergence N={n:>5} (QPS {}/{}): operator {:>8.2?}  floor {:>8.2?}  ratio {:.2}  peak RSS {:.1} MiB  writes/Machine {:.2}  writes {:?}",
            args.qps,
            args.burst,
            r.took,
            f,
            r.took.as_secs_f64() / f.as_secs_f64(),
            r.peak_rss_kib as f64 / 1024.0,
            writes_per_machine(&r.writes, n),
            r.writes
        ));
    }
    for &n in &args.rss {
        eprintln!("memory, {n} Machines");
        let r = operator_run(&args, n, args.rss_qps, (args.rss_qps * 2.0) as u32).await?;
        report.push(format!(
            "memory      N={n:>5} (QPS {}): peak RSS {:.1} MiB, converged in {:.2?}",
            args.rss_qps,
            r.peak_rss_kib as f64 / 1024.0,
            r.took
        ));
    }
    report.extend(felt::run(&args).await?);
    for &shape in &args.clusters {
        report.push(clusters::run(&args, shape).await?);
    }
    println!("{}", report.join("\n"));
    Ok(())
}
