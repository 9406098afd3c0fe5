//! `make dev`: the whole product on this machine, no cluster needed. A local etcd and
//! kube-apiserver with the Machine, NetworkConfiguration, Multus, KubeVirt and CDI CRDs; the operator
//! (`kubevirt-operator run`, built by make) against it with `--webhook-url`, so kube-apiserver
//! calls its self-managed HTTPS webhooks; the example Machines from `examples/` applied (the
//! seed's four and the disk-image ones: an https import, a registry container disk, a clone of
//! the golden image `os-images/debian-12` made here, an installer ISO);
//! their VirtualMachines, PVCs and status shown. Ctrl-C stops everything it started.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const NAMESPACE: &str = "default";
/// The StorageClass, NetworkConfigurations and golden image the examples expect.
const PREREQUISITES: &str = include_str!("setup/prerequisites.yaml");
/// The dev control plane's KubeVirt install resource, serving disk hot-plug (dev only).
const KUBEVIRT: &str = include_str!("dev/kubevirt.yaml");

struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        // SIGTERM first, so it releases its Lease; then make sure it is gone.
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dev = root.join(".dev");
    std::fs::create_dir_all(&dev).context("creating .dev")?;

    let cp = support::ControlPlane::start().await?;
    let mut crds = support::crd_fixtures()?;
    crds.push(root.join("manifests/crds.yaml"));
    cp.install_crds(&crds).await?;
    let kubeconfig = dev.join("kubeconfig");
    // cluster-admin of the dev control plane: readable by its owner only.
    let admin = std::fs::read_to_string(cp.admin_kubeconfig()).context("reading the kubeconfig")?;
    support::write_private(&dev, "kubeconfig", &admin).context("writing .dev/kubeconfig")?;
    eprintln!(
        "control plane up in {:.1?} at {}",
        cp.startup().total,
        cp.server_url()
    );

    let (webhook, metrics, probes) = (
        support::free_port()?,
        support::free_port()?,
        support::free_port()?,
    );
    // What the chart installs in a cluster, for the URL: the operator only fills the caBundle.
    let configurations = Command::new(root.join("target/debug/kubevirt-operator"))
        .args([
            "webhook-configurations",
            "--namespace",
            support::OPERATOR_NAMESPACE,
        ])
        .args(["--webhook-url", &format!("https://127.0.0.1:{webhook}")])
        .output()
        .context("target/debug/kubevirt-operator webhook-configurations")?;
    anyhow::ensure!(
        configurations.status.success(),
        "webhook-configurations: {}",
        String::from_utf8_lossy(&configurations.stderr)
    );
    kubectl_stdin(
        &cp,
        &["apply", "-f", "-"],
        &String::from_utf8_lossy(&configurations.stdout),
    )?;
    let log =
        std::fs::File::create(dev.join("operator.log")).context("creating .dev/operator.log")?;
    let operator = Operator(
        Command::new(root.join("target/debug/kubevirt-operator"))
            .args([
                "--log-format",
                "text",
                "run",
                "--namespace",
                support::OPERATOR_NAMESPACE,
            ])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--webhook-url", &format!("https://127.0.0.1:{webhook}")])
            .args(["--listen", &format!("127.0.0.1:{webhook}")])
            // The networks examples/setup/ defines; nothing is allowed unset.
            .args(["--allowed-bridges", "br-prod,br-storage"])
            .args(["--allowed-vlans", "0,100,200"])
            .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")])
            .args([
                "--health-probe-bind-address",
                &format!("127.0.0.1:{probes}"),
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting target/debug/kubevirt-operator (make dev builds it)")?,
    );
    wait_ready(probes).await?;
    eprintln!(
        "operator ready: webhooks on https://127.0.0.1:{webhook}, metrics on http://127.0.0.1:{metrics}/metrics"
    );

    kubectl_stdin(&cp, &["apply", "-f", "-"], PREREQUISITES)?;
    kubectl_stdin(&cp, &["apply", "-f", "-"], KUBEVIRT)?;
    apply_examples(&cp, &root.join("examples"))?;
    wait_for_status(&cp).await?;
    println!();
    kubectl_show(
        &cp,
        &[
            "get",
            "machines,virtualmachines,datavolumes,persistentvolumeclaims,network-attachment-definitions",
            "-n",
            NAMESPACE,
        ],
    )?;
    println!();
    kubectl_show(
        &cp,
        &[
            "get",
            "machine",
            "custom-vm",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.status}",
        ],
    )?;
    println!("\n");
    println!(
        "No KubeVirt controllers run here, so VMs stay in Creating: there is no VirtualMachineInstance."
    );
    println!(
        "No CDI runs here either: the DataVolumes are made, and Machines with sources stay at DataVolumePending."
    );
    println!("Keep exploring (Ctrl-C here stops the control plane and the operator):");
    let kubectl = support::kubectl_path()?;
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  {} get machines -A", kubectl.display());
    println!("  {} get vm custom-vm -o yaml", kubectl.display());
    println!("  {} describe machine networked-vm", kubectl.display());
    println!(
        "  {} apply -f examples/basic.yaml   # and edit it: try template: huge",
        kubectl.display()
    );
    println!(
        "  target/debug/kubevirt-operator certs status --kubeconfig {} --namespace {}",
        kubeconfig.display(),
        support::OPERATOR_NAMESPACE
    );
    println!("  operator log: {}", dev.join("operator.log").display());
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    drop(operator);
    drop(cp);
    let _ = std::fs::remove_file(&kubeconfig);
    Ok(())
}

async fn wait_ready(probes: u16) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !readyz(probes).await {
        if Instant::now() > deadline {
            bail!("the operator was not ready within 60 s; see .dev/operator.log");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// `GET /readyz` answered 200.
async fn readyz(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut conn) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let mut answer = Vec::new();
    conn.write_all(request).await.is_ok()
        && conn.read_to_end(&mut answer).await.is_ok()
        && answer.starts_with(b"HTTP/1.1 200")
}

/// Applies the example Machines, retrying while kube-apiserver has not yet picked up the
/// webhook configurations the operator just created.
fn apply_examples(cp: &support::ControlPlane, dir: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cp
            .kubectl()?
            .args(["apply", "-n", NAMESPACE, "-f"])
            .arg(dir)
            .output()?;
        if out.status.success() {
            print!("{}", String::from_utf8_lossy(&out.stdout));
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "kubectl apply -f examples/ failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

async fn wait_for_status(cp: &support::ControlPlane) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = cp
            .kubectl()?
            .args([
                "get",
                "machines",
                "-n",
                NAMESPACE,
                "-o",
                "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}",
            ])
            .output()?;
        let phases = String::from_utf8_lossy(&out.stdout);
        if out.status.success()
            && phases.lines().count() >= 4
            && phases.lines().all(|p| !p.is_empty())
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the Machines had no status after 60 s; see .dev/operator.log");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn kubectl_stdin(cp: &support::ControlPlane, args: &[&str], input: &str) -> Result<()> {
    use std::io::Write;
    let mut child = cp
        .kubectl()?
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("kubectl stdin")?
        .write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        bail!("kubectl {} failed", args.join(" "));
    }
    Ok(())
}

fn kubectl_show(cp: &support::ControlPlane, args: &[&str]) -> Result<()> {
    let status = cp.kubectl()?.args(args).status()?;
    if !status.success() {
        bail!("kubectl {} failed", args.join(" "));
    }
    Ok(())
}
