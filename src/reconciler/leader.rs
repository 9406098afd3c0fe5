//! Leader election on the Lease `kubevirt-operator-leader`: only the holder reconciles. When the
//! holder dies, its Lease expires after its duration (`LEADER_ELECTION_LEASE_DURATION`, 15s)
//! and another replica takes over; when it shuts down cleanly it releases the Lease at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;

use super::{FIELD_MANAGER, LEASE_NAME, controller, lease_guard};

/// Resolves when the leader's work must stop (leadership lost, or shutdown).
pub type Stop = std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// The default Lease duration, in seconds: how long a Lease stays valid after its last renewal.
pub const LEASE_DURATION: u64 = 15;

/// How long before expiry the holder renews: half the duration (15s: renewed every 8s, which
/// leaves a late renewal 4s before the leader's own guard stops its work, see `lease_guard`).
pub fn lease_grace(duration: u64) -> u64 {
    duration / 2
}

/// What `/readyz` and tests ask: is this replica leading, and are its caches filled?
#[derive(Debug, Default)]
pub struct State {
    leader: AtomicBool,
    synced: AtomicBool,
}

impl State {
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }
    pub fn caches_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
    pub(crate) fn set_leader(&self, v: bool) {
        self.leader.store(v, Ordering::Release);
    }
    pub(crate) fn set_caches_synced(&self, v: bool) {
        self.synced.store(v, Ordering::Release);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("Lease {LEASE_NAME} in namespace {namespace}: {source}")]
    Lease {
        namespace: String,
        source: LeaseManagerError,
    },
    #[error("the Lease manager stopped")]
    ManagerStopped,
}

/// Runs the controller whenever this replica holds the Lease, until `shutdown` resolves.
/// Losing the Lease stops the controller (its caches are dropped); winning it again starts a
/// fresh one.
pub async fn run<W, F>(
    clients: controller::Clients,
    namespace: &str,
    lease_duration: Duration,
    settings: controller::Settings,
    state: Arc<State>,
    shutdown: impl Future<Output = ()> + Send,
    mut work: W,
) -> Result<(), LeaderError>
where
    // The leader's work (the reconciler, the certificate manager), given a future that
    // resolves when it must stop.
    W: FnMut(Stop) -> F,
    F: Future<Output = ()>,
{
    let lease_err = |source| LeaderError::Lease {
        namespace: namespace.to_owned(),
        source,
    };
    let manager = LeaseManagerBuilder::new(clients.lease.clone(), LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(settings.instance.clone())
        .with_duration(lease_duration.as_secs())
        .with_grace(lease_grace(lease_duration.as_secs()))
        .with_field_manager(format!("{FIELD_MANAGER}-{}", settings.instance))
        .build()
        .await
        .map_err(lease_err)?;
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(clients.lease.clone(), namespace);
    let identity = settings.instance.as_str();
    let (mut leading, task) = manager.watch().await;
    tokio::pin!(shutdown);
    tracing::info!(identity = %settings.instance, lease = LEASE_NAME, namespace, "waiting for leadership");

    let result = loop {
        // Follower: wait to become leader.
        if !*leading.borrow_and_update() {
            tokio::select! {
                changed = leading.changed() => {
                    if changed.is_err() { break Err(LeaderError::ManagerStopped); }
                    continue;
                }
                () = &mut shutdown => break Ok(()),
            }
        }
        // The manager says so; the Lease itself must too, with time left (see lease_guard).
        let held = tokio::select! {
            held = lease_guard::confirmed(&leases, identity) => held,
            changed = leading.changed() => {
                if changed.is_err() { break Err(LeaderError::ManagerStopped); }
                continue;
            }
            () = &mut shutdown => break Ok(()),
        };
        tracing::info!(identity = %settings.instance, "became leader; starting the reconciler");
        state.set_leader(true);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut stop_rx_ctl = stop_rx.clone();
        let ctrl = work(Box::pin(async move {
            let _ = stop_rx_ctl.wait_for(|stop| *stop).await;
        }));
        tokio::pin!(ctrl);
        let outcome = tokio::select! {
            () = &mut ctrl => Leading::ControllerEnded,
            lost = wait_lost(&mut leading) => lost,
            () = lease_guard::lapsed(&leases, identity, held) => Leading::Lapsed,
            () = &mut shutdown => Leading::Shutdown,
        };
        state.set_leader(false);
        // Let in-flight reconciles finish (bounded) before stepping down.
        let _ = stop_tx.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut ctrl).await;
        drop(stop_rx);
        match outcome {
            Leading::Shutdown => break Ok(()),
            Leading::ManagerStopped => break Err(LeaderError::ManagerStopped),
            Leading::Lost => {
                tracing::warn!(identity = %settings.instance, "lost leadership; reconciler stopped");
            }
            Leading::Lapsed => {
                tracing::warn!(
                    identity = %settings.instance,
                    "cannot confirm the Lease before it expires (API server unreachable?); \
                     reconciler stopped until a renewal is seen"
                );
            }
            Leading::ControllerEnded => {
                tracing::warn!(identity = %settings.instance, "reconciler ended on its own; restarting it");
            }
        }
    };
    // Closing the channel makes the manager release the Lease and stop.
    drop(leading);
    match task.await {
        Ok(Ok(_)) => tracing::info!("Lease released"),
        Ok(Err(e)) => tracing::warn!(error = %e, "could not release the Lease"),
        Err(e) => tracing::warn!(error = %e, "Lease manager task failed"),
    }
    result
}

enum Leading {
    Lost,
    /// No renewal seen in time: another replica may take the Lease over.
    Lapsed,
    Shutdown,
    ControllerEnded,
    ManagerStopped,
}

/// Resolves when leadership is lost (or the Lease manager is gone).
async fn wait_lost(leading: &mut watch::Receiver<bool>) -> Leading {
    loop {
        if leading.changed().await.is_err() {
            return Leading::ManagerStopped;
        }
        if !*leading.borrow_and_update() {
            return Leading::Lost;
        }
    }
}
