//! `status.disks[].hotplug`: a disk the operator hot-plugged into the running VM (KubeVirt's
//! declarative hot-plug; `docs/user/disks-and-images.md`, "Adding a disk to a running Machine").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Set on a disk written hot-pluggable into the VM: attached to the running VMI without a
/// restart, and detached when removed from the spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskHotplug {
    /// KubeVirt's phase of the volume on the running VMI (`status.volumeStatus[].phase`):
    /// Pending, Bound, AttachedToNode, MountedToPod, Ready (attached), Detaching, …; unset while
    /// the VMI reports none (not running, or not yet attached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}
