//! Operating a running Machine: its run strategy, the restart annotation, and what the guest
//! reports back (interfaces, operating system), read from the VMI.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// KubeVirt's run strategies. `running: true` is `Always`, `running: false` is `Halted`.
pub const RUN_STRATEGIES: &[&str] = &["Always", "Halted", "RerunOnFailure", "Manual"];
pub const RUN_STRATEGY_ALWAYS: &str = "Always";
pub const RUN_STRATEGY_HALTED: &str = "Halted";

/// How changes that need a restart are applied. `Manual` is the default.
pub const UPDATE_STRATEGIES: &[&str] = &["Manual", "Restart"];
pub const UPDATE_STRATEGY_RESTART: &str = "Restart";

/// One VM interface as the VMI reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStatus {
    /// The Machine's network name (`default` for the pod network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// The interface's name inside the guest (from the guest agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_name: Option<String>,
    /// The addresses the Machine's spec gives this interface (`spec.networks[].addresses`),
    /// beside what the guest reports in `ipAddresses`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub desired_addresses: Vec<String>,
}

/// The guest's operating system, from the guest agent while it is connected.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuestInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_release: Option<String>,
}

/// The run strategy a spec asks for: `runStrategy`, else `running` (default true).
pub fn run_strategy(run_strategy: Option<&str>, running: Option<bool>) -> &str {
    match (run_strategy, running) {
        (Some(s), _) => s,
        (None, Some(false)) => RUN_STRATEGY_HALTED,
        (None, _) => RUN_STRATEGY_ALWAYS,
    }
}
