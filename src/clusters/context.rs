//! What every supervisor of a KubevirtConfig shares.

use std::sync::Arc;

use kube::Client;

use super::Settings;
use super::registry::Registry;

/// Counts the Machines placed on a KubevirtConfig (fills `status.machines`).
pub type MachineCount = Arc<dyn Fn(&str) -> u32 + Send + Sync>;

/// Shared by every supervisor.
pub(super) struct Context {
    /// The management cluster: KubevirtConfigs and their Secrets.
    pub client: Client,
    pub settings: Settings,
    pub registry: Registry,
    pub machines: MachineCount,
}
