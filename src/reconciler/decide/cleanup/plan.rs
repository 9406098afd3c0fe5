//! What cleanup's decision says: each object's fate with its reason, what the rest waits for,
//! and whether the finalizer goes.

use crate::reconciler::decide::problem::Kind;
use crate::reconciler::decide::release::Release;

/// Cleanup's plan for one deleting Machine, carried out in order by `act::cleanup`.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// In order: the VM; then, unless [`Plan::wait`] holds, its disks, DataVolumes, derived
    /// Secret and attachments.
    pub actions: Vec<Action>,
    /// What the rest of the cleanup waits for (retried with backoff).
    pub wait: Option<Wait>,
    /// Everything made for the Machine is gone, kept or abandoned: its finalizer goes.
    pub remove_finalizer: bool,
    /// While it waits for its cluster: the `ClusterReady` message (why, and how to abandon).
    pub cluster_message: Option<String>,
}

/// What is done with one object read by name.
#[derive(Debug, PartialEq)]
pub enum Action {
    /// Deleted if it is still the object with `uid` (never a namesake made since).
    Delete {
        kind: Kind,
        name: String,
        uid: String,
        reason: Reason,
    },
    /// Kept and freed of the Machine: its references dropped, the release proof added.
    Release { release: Release, reason: Reason },
    /// Left as it is.
    Keep {
        kind: Kind,
        name: String,
        reason: Reason,
    },
}

/// Why an object is deleted, released or kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Made for this Machine (its made-for proof says so).
    Ours,
    /// A removed CD-ROM's DataVolume the live Machine had not deleted yet.
    RemovedCdrom,
    /// An attachment of ours that no other live Machine there names.
    Unused,
    /// Not this Machine's on the evidence: someone else's, released, a conflict, or one whose
    /// adoption failed. Never touched.
    NotOurs,
    /// Already being deleted.
    Going,
    /// A disk under `vitistack.io/retain-disks: "true"`.
    RetainDisks,
    /// A disk under an orphan deletion (`--cascade=orphan`).
    OrphanDeletion,
    /// A disk that no longer references the Machine (the garbage collector orphaned it before
    /// the cleanup ran, or an admin freed it).
    Unreferenced,
    /// A kept disk released already.
    Released,
}

/// What the rest of the cleanup waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// KubeVirt to take down the VMI the Machine's VM controls.
    Vmi,
    /// The Machine's remote cluster (nothing is touched while it cannot be worked on).
    Cluster,
    /// A MachineRestore holding the Machine: it needs the Machine and its VM (which owns the
    /// restored claims) until it let go, which it does soon once the Machine is deleted.
    Restore,
    /// A VM on the Machine's remote cluster labelled for it but not proven ours (made under a
    /// lost key and not re-proven, or planted): the finalizer stays while what may be its VM
    /// runs, unless the admin abandons the cluster (`vitistack.io/abandon-remote: "true"`).
    UnprovenVm,
}
