//! Carrying out a restart `decide::restart` asked for: the VMI the Machine's VM controls is
//! deleted (by uid, never a namesake started since), KubeVirt's VM controller starts a new one,
//! and a Normal `Restarted` Event says why; the restart budget (`run::restart_budget`) let it go
//! or held it back before.

use kube::api::Api;
use kube::runtime::events::EventType;

use crate::api::names::RESTARTED_AT_ANNOTATION;
use crate::reconciler::Error;
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;
use crate::reconciler::decide::restart::{Cause, Restart};
use crate::reconciler::decide::restart_budget::{Gate, RESTART_PENDING};
use crate::reconciler::run::cluster::Cluster;

use super::delete_exact;
use crate::reconciler::decide::notices::Notice;

/// The Event reason of a restart.
pub const RESTARTED: &str = "Restarted";

/// A Normal `RestartPending` Event when the Machine has just started waiting.
pub fn waiting_notice(gate: &Gate) -> Option<Notice> {
    let note = gate.started_waiting.as_ref()?;
    tracing::info!("restart held back by the restart budget: {note}");
    Some(Notice {
        type_: EventType::Normal,
        reason: RESTART_PENDING.to_owned(),
        note: note.clone(),
    })
}

/// Carries out `restart`; returns the Event announcing it, if a VMI was deleted.
pub async fn restart(
    cluster: &Cluster,
    ns: &str,
    restart: &Restart,
) -> Result<Option<Notice>, Error> {
    let Some((vmi, uid, cause)) = &restart.delete_vmi else {
        return Ok(None);
    };
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(cluster.client.clone(), ns);
    delete_exact(&vmis, vmi, uid.clone()).await?;
    let note = match cause {
        Cause::Requested(at) => format!("restarted the VM for {RESTARTED_AT_ANNOTATION}: {at}"),
        Cause::PendingChange(generation) => format!(
            "restarted the VM to apply generation {generation}'s changes (updateStrategy: Restart)"
        ),
        Cause::Evacuation(node) => format!(
            "restarted the VM off node {node}, which is being drained (External eviction, --external-eviction restart)"
        ),
    };
    tracing::info!(vmi = %vmi, "{note}: deleted its VMI");
    let notice = Notice {
        type_: EventType::Normal,
        reason: RESTARTED.to_owned(),
        note,
    };
    Ok(Some(notice))
}
