//! Remote KubeVirt clusters: each `KubevirtConfig` names a Secret with a kubeconfig; the leader
//! keeps a client per config, probes it, writes what it found into the config's status, and
//! publishes each config's health in a [`Registry`] the Machine reconciler reads.
//!
//! Pure core, thin I/O shell:
//! - [`kubeconfig`] (pure): the kubeconfig read from the Secret's data, exec plugins and file
//!   paths refused, and the revision that changes with its content.
//! - [`decide`] (pure, table-tested): an observation becomes a reason and message, and a status
//!   only when it changed; a probe's error becomes Unreachable or Unauthorized.
//! - [`registry`]: the [`Registry`], [`Health`], [`Connection`] and [`Reason`] the reconciler
//!   uses (data, no I/O).
//! - [`probe`] (I/O): the client built from a kubeconfig, and the probe of its API server.
//! - [`supervisor`] (I/O): one config's loop: its Secret watched, observe -> decide -> act.
//! - [`mod@run`] (I/O): the controller that keeps one supervisor per KubevirtConfig.

pub mod context;
pub mod decide;
pub mod kubeconfig;
pub mod probe;
pub mod registry;
pub mod run;
pub mod supervisor;

use std::time::Duration;

pub use context::MachineCount;
pub use registry::{Apis, Connection, Health, Reason, Registry};
pub use run::run;

/// The default of `--kubevirt-config-probe-interval`.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(30);
/// How long connecting to a remote API server may take: an unreachable cluster is noticed fast.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How remote clusters are reached and watched; independent of the Machine reconciler.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How often each KubevirtConfig's cluster is probed (besides at each change of its Secret).
    pub probe_interval: Duration,
    /// TCP and TLS connect timeout of every remote client.
    pub connect_timeout: Duration,
    /// How long a remote request may go without an answer (watches exempt).
    pub read_timeout: Duration,
    /// Each remote client's rate limit (client-go's QPS and burst).
    pub qps: f64,
    pub burst: u32,
    /// `--default-kubevirt-config`: the KubevirtConfig of Machines that name none; None: the
    /// local cluster. Read by the Machine reconciler, not here.
    pub default_kubevirt_config: Option<String>,
}

impl Settings {
    /// Defaults for everything but the probe interval (tests use a short one).
    pub fn new(probe_interval: Duration) -> Self {
        Settings {
            probe_interval,
            connect_timeout: CONNECT_TIMEOUT,
            read_timeout: crate::client::DEFAULT_READ_TIMEOUT,
            qps: 50.0,
            burst: 100,
            default_kubevirt_config: None,
        }
    }

    /// The longest one probe (a few requests) may take before the cluster counts as
    /// unreachable.
    pub fn probe_timeout(&self) -> Duration {
        (self.connect_timeout * 2).max(Duration::from_secs(10))
    }
}
