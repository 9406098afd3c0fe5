//! Access checks as the requesting user: the operator reads some objects on a Machine author's
//! behalf (a cloud-init Secret, a disk image's credentials, a golden image to clone), so the
//! author must be allowed to reach them too, or installing the operator would grant a right
//! nobody gave.
//!
//! - [`needs`]: pure, which permissions a request needs from its author, given (old, new).
//! - [`sources`]: pure, what the disk and CD-ROM sources among them need.
//! - [`claims`]: pure, what adopting an existing claim (left by `retain-disks`) needs.
//! - [`placement`]: pure, what placing a Machine on a remote cluster needs (`use` on its
//!   KubevirtConfig) and what a remote Machine's author is asked.
//! - [`review`]: the I/O shell, one SubjectAccessReview per needed permission, as the author,
//!   and the look-up of which claims exist.

pub mod claims;
pub mod data_sources;
pub mod fairness;
pub mod needs;
pub mod placement;
pub mod review;
pub mod sources;

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

pub use needs::{Change, machine_needs};
pub use review::{AccessError, AccessReviewer};

/// The author of an admission request, as kube-apiserver authenticated them (`request.userInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub extra: BTreeMap<String, Vec<String>>,
}

/// One permission a request needs from its author, and the field that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    /// The field whose value needs the permission, e.g. `spec.cloudInit.secretRef.name`.
    pub field: String,
    pub verb: String,
    /// API group; `""` is the core group.
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The object exists and the Machine would take it over (a claim a `retain-disks` deletion
    /// left): the denial names it and says so. Otherwise it is not named, whether it exists
    /// being none of the author's business.
    pub adopted: bool,
}

/// At most this many distinct permissions are asked of kube-apiserver for one request (each is
/// a SubjectAccessReview): a review needing more is refused at once, naming the limit, so no
/// request can make the webhook a SubjectAccessReview amplifier.
pub const MAX_ACCESS_CHECKS: usize = 16;

/// The number of distinct SubjectAccessReviews `needed` asks, when over [`MAX_ACCESS_CHECKS`].
pub fn over_limit(needed: &[Permission]) -> Option<usize> {
    let distinct: std::collections::BTreeSet<_> =
        needed.iter().map(Permission::review_key).collect();
    (distinct.len() > MAX_ACCESS_CHECKS).then_some(distinct.len())
}

impl Permission {
    /// What a SubjectAccessReview asks, without the field that needs it.
    pub fn review_key(&self) -> [&str; 6] {
        [
            &self.verb,
            &self.group,
            &self.resource,
            &self.subresource,
            &self.namespace,
            &self.name,
        ]
    }

    /// Whether a denial may name the object: one the author named as a clone source (CDI
    /// names it in its own refusal), or one that would be adopted.
    fn named_in_denial(&self) -> bool {
        self.adopted || (self.subresource == "source" && !self.name.is_empty())
    }

    /// The resource as RBAC rules spell it: `secrets`, `datavolumes/source`.
    pub fn resource_path(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// Why a permission is refused. Names the verb, resource and namespace only, unless the object
/// is [`Permission::adopted`]: whether it exists is not the author's to learn from us.
pub struct Denial<'a> {
    pub user: &'a str,
    pub permission: &'a Permission,
    /// The remote cluster an adopted claim would live on: whether it exists there is unknown.
    pub cluster: Option<&'a str>,
}

impl fmt::Display for Denial<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.permission;
        let resource = if p.group.is_empty() {
            p.resource_path()
        } else {
            format!("{}.{}", p.resource_path(), p.group)
        };
        if p.namespace.is_empty() {
            // Cluster-scoped (a KubevirtConfig): named, as the author named it.
            write!(
                f,
                "user {:?} cannot {} {resource} {:?}",
                self.user, p.verb, p.name
            )
        } else if p.named_in_denial() && !p.adopted {
            write!(
                f,
                "user {:?} cannot {} {resource} {:?} in namespace {:?}",
                self.user, p.verb, p.name, p.namespace
            )
        } else if let (true, Some(cluster)) = (p.adopted, self.cluster) {
            write!(
                f,
                "user {:?} cannot {} {resource} {:?} in namespace {:?}, which this disk would \
                 adopt if it exists on cluster {cluster} (asked here: the remote namespace \
                 mirrors this one)",
                self.user, p.verb, p.name, p.namespace
            )
        } else if p.adopted {
            write!(
                f,
                "user {:?} cannot {} {resource} {:?} in namespace {:?}, \
                 which exists and would be adopted by this disk",
                self.user, p.verb, p.name, p.namespace
            )
        } else {
            write!(
                f,
                "user {:?} cannot {} {resource} in namespace {:?}",
                self.user, p.verb, p.namespace
            )
        }
    }
}
