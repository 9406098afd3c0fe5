//! The snapshot controllers' I/O shell, on the leader: per watch scope, the MachineSnapshot
//! controller ([`super::snapshot`]), the MachineRestore controller ([`super::restorer`]) and the
//! schedule ([`super::scheduler`]). Nothing starts when the MachineSnapshot CRD is not served.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::join_all;
use kube::Client;

use super::context::{Context, NO_KUBEVIRT_SNAPSHOTS, Settings};
use crate::discovery;
use crate::reconciler::run::ownership_key::wait_for_key;

/// Runs the snapshot controllers until `shutdown` resolves.
pub async fn run(
    client: Client,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let shutdown = shutdown.shared();
    let served = tokio::select! {
        s = discovery::serves(&client, "vitistack.io/v1alpha1", "machinesnapshots") => s,
        () = shutdown.clone() => return,
    };
    if !served {
        tracing::warn!(
            "the MachineSnapshot CRD is not installed: no snapshots or restores; restart the operator after installing it"
        );
        return;
    }
    let key = tokio::select! {
        key = wait_for_key(&client, &settings.namespace) => key,
        () = shutdown.clone() => return,
    };
    let kubevirt = tokio::select! {
        s = discovery::serves(&client, "snapshot.kubevirt.io/v1beta1", "virtualmachinerestores") => s,
        () = shutdown.clone() => return,
    };
    if !kubevirt {
        tracing::warn!(
            "{NO_KUBEVIRT_SNAPSHOTS}: MachineSnapshots and MachineRestores of Machines on this cluster fail"
        );
    }
    let ctx = Arc::new(Context {
        client,
        settings: settings.clone(),
        key,
        kubevirt,
    });
    tracing::info!(tick = ?settings.tick, "starting the snapshot controllers");
    join_all(settings.scopes.iter().map(|scope| {
        let (ctx, shutdown) = (ctx.clone(), shutdown.clone());
        async move {
            futures::join!(
                super::snapshot::run(ctx.clone(), scope, shutdown.clone()),
                super::restorer::run(ctx.clone(), scope, shutdown.clone()),
                super::scheduler::run(ctx.clone(), scope, shutdown.clone()),
            );
        }
    }))
    .await;
    tracing::info!("snapshot controllers stopped");
}
