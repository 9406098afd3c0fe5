//! Where a Machine's VM runs and what a node drain does to it: the eviction strategy, the
//! placement copied to the VM's template, and the migration status read back from the VMI.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// KubeVirt's eviction strategies; `None` keeps KubeVirt's cluster-wide default (the VM field
/// stays unset).
pub const EVICTION_STRATEGIES: &[&str] =
    &["LiveMigrate", "LiveMigrateIfPossible", "External", "None"];
/// The eviction strategy that leaves the VM's field unset.
pub const EVICTION_NONE: &str = "None";
/// The one that needs every disk migratable (ReadWriteMany).
pub const EVICTION_LIVE_MIGRATE: &str = "LiveMigrate";
/// `--default-eviction-strategy`'s own default.
pub const DEFAULT_EVICTION_STRATEGY: &str = "LiveMigrateIfPossible";
/// Tolerations and node-selector entries per Machine: far more than a real placement uses.
pub const MAX_TOLERATIONS: usize = 64;
pub const MAX_NODE_SELECTOR: usize = 64;

/// Where the VM may run; every field is copied to the VM's template as Kubernetes defines it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Node labels the VM's node must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_NODE_SELECTOR))]
    pub node_selector: BTreeMap<String, String>,
    /// Node, pod and pod anti-affinity (core/v1 Affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Taints the VM tolerates (core/v1 Toleration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_TOLERATIONS))]
    pub tolerations: Vec<Toleration>,
    /// A PriorityClass for the VM's pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

/// The VMI's last or current live migration, from its `status.migrationState`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStatus {
    /// Running, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Time>,
}

/// `status.migration.phase` values.
pub mod migration_phase {
    pub const RUNNING: &str = "Running";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
}
