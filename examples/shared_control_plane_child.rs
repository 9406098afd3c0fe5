//! Child process for `tests/control_plane.rs::shared_instance_dies_with_its_process`: starts the
//! process-wide shared control plane, reports its directory, pids and ports, then exits (or waits
//! to be killed with CONTROL_PLANE_HOLD), so the parent can check nothing outlives it.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::time::Duration;

use support::ControlPlane;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    support::init_crypto();
    let cp = ControlPlane::shared().await?;
    let client = cp.client().await?;
    client.apiserver_version().await?;
    let report = std::env::var_os("CONTROL_PLANE_REPORT")
        .ok_or_else(|| anyhow::anyhow!("CONTROL_PLANE_REPORT is not set"))?;
    let ports = cp.ports();
    let body = serde_json::json!({
        "dir": cp.dir(),
        "pids": cp.pids(),
        "ports": [ports.apiserver, ports.etcd_client],
    });
    let partial = PathBuf::from(&report).with_extension("partial");
    std::fs::write(&partial, body.to_string())?;
    std::fs::rename(&partial, &report)?;
    if std::env::var_os("CONTROL_PLANE_HOLD").is_some() {
        // Wait to be SIGKILLed by the parent test (bounded, so a lost child cannot linger).
        tokio::time::sleep(Duration::from_secs(300)).await;
    }
    Ok(())
}
