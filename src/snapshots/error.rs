//! What can go wrong in a snapshot or restore reconcile (all retried with backoff).

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("{0} has no namespace")]
    NoNamespace(String),
    #[error("Machine {0} is gone")]
    MachineGone(String),
}
