//! Why a reconcile failed. Every variant is retried with backoff by the controller. Problems a
//! user can fix are not errors: they are `Problem`s, shown in the status, and the Machine is
//! requeued with the same backoff.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The Machine is being deleted and its VirtualMachineInstance has not gone yet.
    #[error("waiting for VirtualMachineInstance {0} to go")]
    VmiStillRunning(String),
    /// The Machine is being deleted and a VM on its remote cluster carries its labels without
    /// being proven ours.
    #[error(
        "VirtualMachine {0} on the Machine's cluster is labelled for it but not proven ours: the finalizer stays while it is there (annotate the Machine vitistack.io/abandon-remote=true to let it go, the VM left running)"
    )]
    RemoteVmUnproven(String),
    /// A plan touched a cluster that cannot be worked on (cleanup's decision never makes one).
    #[error("the Machine's cluster cannot be worked on")]
    NoCluster,
    #[error("Machine has no namespace")]
    NoNamespace,
    #[error("the watch caches were dropped (controller shutting down)")]
    CachesGone,
}

impl Error {
    /// A short label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(_)) => "api",
            Error::Kube(_) => "client",
            Error::VmiStillRunning(_) | Error::RemoteVmUnproven(_) => "deleting",
            Error::NoCluster => "cluster",
            Error::NoNamespace => "invalid",
            Error::CachesGone => "shutdown",
        }
    }
}

/// The API server's answer in one line, without any object content.
pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => {
            format!("{} ({}): {}", status.reason, status.code, status.message)
        }
        other => other.to_string(),
    }
}

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
