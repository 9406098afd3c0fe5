//! `make dev`: a local etcd + kube-apiserver (the test control plane) with the fixture CRDs,
//! until Ctrl-C. Writes the admin kubeconfig to `.dev/kubeconfig`.

#[path = "../tests/support/mod.rs"]
mod support;

use anyhow::{Context, Result};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let cp = support::ControlPlane::start().await?;
    let crds = cp.install_crds(&support::crd_fixtures()?).await?;
    let dev = std::path::Path::new(".dev");
    std::fs::create_dir_all(dev).context("creating .dev")?;
    let kubeconfig = dev.join("kubeconfig");
    std::fs::copy(cp.admin_kubeconfig(), &kubeconfig).context("writing .dev/kubeconfig")?;
    let kubeconfig = kubeconfig.canonicalize()?;
    eprintln!(
        "control plane up in {:?} at {}",
        cp.startup().total,
        cp.server_url()
    );
    eprintln!("CRDs: {}", crds.join(", "));
    eprintln!(
        "namespace for the operator: {}",
        support::OPERATOR_NAMESPACE
    );
    eprintln!("  export KUBECONFIG={}", kubeconfig.display());
    eprintln!("  alias kubectl={}", support::kubectl_path()?.display());
    eprintln!("Ctrl-C stops it and removes its data.");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    drop(cp);
    std::fs::remove_file(&kubeconfig).ok();
    Ok(())
}
