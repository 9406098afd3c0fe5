//! Leader election on the Lease `kubevirt-operator-leader`, at process level: only the holder
//! runs the leader's work (the reconciler, the certificate manager). When the holder dies, its
//! Lease expires after its duration (`LEADER_ELECTION_LEASE_DURATION`, 15s) and another replica
//! takes over; when it shuts down cleanly it releases the Lease at once.
//!
//! Knows nothing of the work it guards: it is given a Lease client, where and as whom to hold
//! the Lease, and a closure that starts the work.

pub mod lease_guard;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;

/// The Lease the replicas elect a leader with.
pub const LEASE_NAME: &str = "kubevirt-operator-leader";

/// Resolves when the leader's work must stop (leadership lost, or shutdown).
pub type Stop = std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// The default Lease duration, in seconds: how long a Lease stays valid after its last renewal.
pub const LEASE_DURATION: u64 = 15;

/// How long before expiry the holder renews: half the duration (15s: renewed every 8s, which
/// leaves a late renewal 4s before the leader's own guard stops its work, see `lease_guard`).
pub fn lease_grace(duration: u64) -> u64 {
    duration / 2
}

/// What `/readyz` and tests ask: is this replica leading (running the leader's work)?
#[derive(Debug, Default)]
pub struct State {
    leader: AtomicBool,
}

impl State {
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }
    pub(crate) fn set_leader(&self, v: bool) {
        self.leader.store(v, Ordering::Release);
    }
}

/// Where and as whom the Lease is held.
#[derive(Clone)]
pub struct Election {
    /// The client for the Lease alone, so renewals never queue behind other work.
    pub client: Client,
    pub namespace: String,
    /// This replica's holder identity (the pod name in a cluster).
    pub identity: String,
    /// How long a Lease stays valid after its last renewal.
    pub duration: Duration,
    /// Field manager of the Lease's server-side applies.
    pub field_manager: String,
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

/// Runs the work whenever this replica holds the Lease, until `shutdown` resolves. Losing the
/// Lease stops the work (the reconciler drops its caches); winning it again starts it afresh.
pub async fn run<W, F>(
    election: &Election,
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
    let namespace = election.namespace.as_str();
    let identity = election.identity.as_str();
    let lease_err = |source| LeaderError::Lease {
        namespace: namespace.to_owned(),
        source,
    };
    let seconds = election.duration.as_secs();
    let manager = LeaseManagerBuilder::new(election.client.clone(), LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(seconds)
        .with_grace(lease_grace(seconds))
        .with_field_manager(election.field_manager.clone())
        .build()
        .await
        .map_err(lease_err)?;
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(election.client.clone(), namespace);
    let (mut leading, task) = manager.watch().await;
    tokio::pin!(shutdown);
    tracing::info!(%identity, lease = LEASE_NAME, namespace, "waiting for leadership");

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
        tracing::info!(%identity, "became leader; starting the leader's work");
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
                tracing::warn!(%identity, "lost leadership; the leader's work stopped");
            }
            Leading::Lapsed => {
                tracing::warn!(
                    %identity,
                    "cannot confirm the Lease before it expires (API server unreachable?); \
                     the leader's work stopped until a renewal is seen"
                );
            }
            Leading::ControllerEnded => {
                tracing::warn!(%identity, "the leader's work ended on its own; restarting it");
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
