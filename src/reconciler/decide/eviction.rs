//! A node drain reaching a Machine's VM (pure, table-tested below). KubeVirt marks a VMI it is
//! asked to evict with `status.evacuationNodeName`; what then happens depends on the VM's
//! eviction strategy. `LiveMigrate`: KubeVirt migrates it, unless the VM cannot live-migrate,
//! when the drain waits for ever. `External`: KubeVirt does nothing and waits for someone else to
//! move the VM: this operator, as the `--external-eviction` setting says (`notify`: the
//! condition and an Event only; `restart`: the VM is stopped and started, so the scheduler
//! places it elsewhere and the drain finishes). Either way the Machine says it, as the condition
//! `EvictionRequested`, so a hanging drain is never silent.

use crate::api::MachineSpec;
use crate::api::placement::EVICTION_NONE;
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;

pub use crate::machine::catalog::ExternalEviction;

use super::migration::live_migratable;

/// The condition, its reasons, and the Warning Event's reason.
pub const EVICTION_REQUESTED: &str = "EvictionRequested";
pub mod reason {
    /// `External`: the operator notifies (`--external-eviction notify`).
    pub const EXTERNAL: &str = "ExternalEviction";
    /// `External`: the operator restarts the VM off the node (`--external-eviction restart`).
    pub const RESTARTING: &str = "RestartingOffNode";
    /// `LiveMigrate`: KubeVirt migrates the VM off the node.
    pub const MIGRATING: &str = "Migrating";
    /// `LiveMigrate` on a VM that cannot live-migrate: the drain is blocked.
    pub const NOT_MIGRATABLE: &str = "NotMigratable";
    /// No strategy of the Machine's: KubeVirt's cluster-wide one decides.
    pub const DRAINING: &str = "NodeDraining";
}

/// A drain that reached the Machine's VM: the condition to show, and whether to restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// The node being drained.
    pub node: String,
    pub reason: &'static str,
    pub message: String,
    /// Restart the VM (its VMI) off the node.
    pub restart: bool,
}

/// The eviction of the Machine's own `vmi`, if one was asked for; `strategy` is the Machine's
/// eviction strategy in force (`spec.evictionStrategy`, else the cluster default; `None`: the
/// VM carries none and KubeVirt's cluster-wide one applies).
pub fn decide(
    vmi: Option<&VirtualMachineInstance>,
    strategy: Option<&str>,
    external: ExternalEviction,
) -> Option<Eviction> {
    let status = vmi?.status.as_ref()?;
    let node = status
        .evacuation_node_name
        .clone()
        .filter(|n| !n.is_empty())?;
    let (reason, message, restart) = match strategy {
        Some("External") => match external {
            ExternalEviction::Notify => (
                reason::EXTERNAL,
                format!(
                    "node {node} is being drained and the VM's eviction strategy is External: the drain waits until the VM is moved (stop and start the Machine, or set --external-eviction restart)"
                ),
                false,
            ),
            ExternalEviction::Restart => (
                reason::RESTARTING,
                format!(
                    "node {node} is being drained and the VM's eviction strategy is External: the operator restarts the VM so that it runs elsewhere"
                ),
                true,
            ),
        },
        Some("LiveMigrate" | "LiveMigrateIfPossible") => {
            match live_migratable(status).filter(|c| c.status != "True") {
                Some(c) => (
                    reason::NOT_MIGRATABLE,
                    format!(
                        "node {node} is being drained but the VM cannot live-migrate ({}): the drain waits until the VM is stopped or made migratable",
                        c.message
                            .as_deref()
                            .or(c.reason.as_deref())
                            .unwrap_or("LiveMigratable is False")
                    ),
                    false,
                ),
                None => (
                    reason::MIGRATING,
                    format!("node {node} is being drained: KubeVirt live-migrates the VM off it"),
                    false,
                ),
            }
        }
        // None set on the VM: KubeVirt's cluster-wide strategy decides.
        _ => (
            reason::DRAINING,
            format!(
                "node {node} is being drained: KubeVirt's cluster-wide eviction strategy decides what happens to the VM"
            ),
            false,
        ),
    };
    Some(Eviction {
        node,
        reason,
        message,
        restart,
    })
}

/// The eviction strategy the VM carries for `spec`: its own, else the operator's default;
/// `None` when that is `None` (the VM then carries none: KubeVirt's cluster-wide one applies).
pub fn strategy<'a>(spec: &'a MachineSpec, default: &'a str) -> Option<&'a str> {
    Some(spec.eviction_strategy.as_deref().unwrap_or(default))
        .filter(|s| !s.is_empty() && *s != EVICTION_NONE)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vmi(status: serde_json::Value) -> VirtualMachineInstance {
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "m"}, "spec": {}, "status": status
        }))
        .expect("vmi")
    }

    #[test]
    fn a_drain_is_said_and_acted_on_as_the_strategy_and_setting_say() {
        use ExternalEviction::{Notify, Restart};
        let drained = vmi(json!({"evacuationNodeName": "n1", "nodeName": "n1"}));
        let blocked = vmi(json!({"evacuationNodeName": "n1", "conditions": [
            {"type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable",
             "message": "cannot migrate VMI: PVC m-root is not shared"}]}));
        let migratable = vmi(json!({"evacuationNodeName": "n1", "conditions": [
            {"type": "LiveMigratable", "status": "True"}]}));
        let running = vmi(json!({"nodeName": "n1"}));
        // (row, vmi, strategy, setting, expected reason and restart)
        let rows = [
            (
                "external, notify",
                Some(&drained),
                Some("External"),
                Notify,
                Some((reason::EXTERNAL, false)),
            ),
            (
                "external, restart",
                Some(&drained),
                Some("External"),
                Restart,
                Some((reason::RESTARTING, true)),
            ),
            (
                "live, blocked",
                Some(&blocked),
                Some("LiveMigrate"),
                Restart,
                Some((reason::NOT_MIGRATABLE, false)),
            ),
            (
                "live, migrating",
                Some(&migratable),
                Some("LiveMigrate"),
                Notify,
                Some((reason::MIGRATING, false)),
            ),
            ("no drain", Some(&running), Some("External"), Restart, None),
            (
                "KubeVirt's default",
                Some(&drained),
                None,
                Restart,
                Some((reason::DRAINING, false)),
            ),
            ("no VMI", None, Some("External"), Restart, None),
        ];
        for (row, vmi, strategy, setting, want) in rows {
            let got = decide(vmi, strategy, setting);
            assert_eq!(got.as_ref().map(|e| (e.reason, e.restart)), want, "{row}");
            if let Some(e) = got {
                assert_eq!(e.node, "n1", "{row}");
                assert!(e.message.contains("node n1"), "{row}: {}", e.message);
            }
        }
        let blocked = decide(Some(&blocked), Some("LiveMigrate"), Notify).expect("blocked");
        assert!(
            blocked.message.contains("PVC m-root is not shared"),
            "{}",
            blocked.message
        );
    }

    #[test]
    fn the_strategy_is_the_machines_else_the_clusters() {
        let own: MachineSpec =
            serde_json::from_value(json!({"template": "small", "evictionStrategy": "External"}))
                .expect("spec");
        let none: MachineSpec = serde_json::from_value(json!({"template": "small"})).expect("spec");
        assert_eq!(strategy(&own, "LiveMigrate"), Some("External"));
        assert_eq!(strategy(&none, "LiveMigrate"), Some("LiveMigrate"));
        assert_eq!(strategy(&none, "None"), None);
    }
}
