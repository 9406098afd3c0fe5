//! Carrying out a restart `decide::restart` asked for: the VMI the Machine's VM controls is
//! deleted (by uid, never a namesake started since), KubeVirt's VM controller starts a new one,
//! and a Normal `Restarted` Event says why.

use kube::api::Api;
use kube::runtime::events::EventType;

use crate::api::Machine;
use crate::api::names::RESTARTED_AT_ANNOTATION;
use crate::reconciler::Error;
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;
use crate::reconciler::decide::restart::{Cause, Restart};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;

use super::delete_exact;
use super::events::{self, Notice};

/// The Event reason of a restart.
pub const RESTARTED: &str = "Restarted";

pub async fn restart(
    ctx: &Context,
    cluster: &Cluster,
    machine: &Machine,
    ns: &str,
    restart: &Restart,
) -> Result<(), Error> {
    let Some((vmi, uid, cause)) = &restart.delete_vmi else {
        return Ok(());
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
    let (recorder, machine) = (ctx.events.clone(), machine.clone());
    tokio::spawn(async move { events::publish(&recorder, &machine, vec![notice]).await });
    Ok(())
}
