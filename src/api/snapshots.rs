//! `vitistack.io/v1alpha1` MachineSnapshot and MachineRestore, and a Machine's snapshot
//! schedule: a Machine's disks protected by KubeVirt's VirtualMachineSnapshot and
//! VirtualMachineRestore. The rules are in `crate::snapshots`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::required_without_default;

/// Scheduled snapshots kept per Machine: at least one, at most a hundred.
pub const KEEP: (i64, i64) = (1, 100);
/// `keep` when the schedule sets none.
pub const DEFAULT_KEEP: i64 = 7;
/// A cron line is short; bounded so a Machine stays small.
pub const MAX_SCHEDULE: usize = 128;
/// The newest snapshots a Machine's status lists of the Machine, and again of earlier Machines
/// of its name.
pub const NEWEST_SNAPSHOT_REFS: usize = 5;
/// The snapshots a Machine's status lists at most.
pub const MAX_SNAPSHOT_REFS: usize = 2 * NEWEST_SNAPSHOT_REFS;
/// Disks a snapshot lists (a Machine's disks and CD-ROMs).
pub const MAX_SNAPSHOT_DISKS: usize = 300;
/// Error messages mirrored from KubeVirt, cut to this many bytes.
pub const MAX_ERROR: usize = 1024;

/// On a MachineSnapshot the schedule made: `"true"`. A description only (anyone may write it):
/// the schedule counts and deletes what its made-for proof says it made (`crate::snapshots::scheduler`).
pub const SCHEDULED_LABEL: &str = "vitistack.io/scheduled-snapshot";
/// The kind the made-for proof of a scheduled MachineSnapshot names (the operator's schedule
/// puts it on each snapshot it makes; the scheduler and `SnapshotsReady` trust only it).
pub const SCHEDULED_PROOF_KIND: &str = "MachineSnapshot";
/// On a scheduled MachineSnapshot: the due time (RFC 3339, UTC) it was made for. A description
/// only: the schedule reads the due time from the proven name.
pub const SCHEDULED_FOR_ANNOTATION: &str = "vitistack.io/scheduled-for";

/// Phases of a MachineSnapshot (KubeVirt's, plus `Pending` before the VirtualMachineSnapshot
/// exists).
pub mod snapshot_phase {
    pub const PENDING: &str = "Pending";
    pub const IN_PROGRESS: &str = "InProgress";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
}

/// Why a MachineSnapshot failed, when the operator decided it.
pub mod snapshot_reason {
    /// Its Machine had no VM in this cluster within the pending limit.
    pub const NO_VM: &str = "NoVM";
}

/// Phases of a MachineRestore, in order (see `crate::snapshots::restore`).
pub mod restore_phase {
    pub const PENDING: &str = "Pending";
    pub const STOPPING: &str = "Stopping";
    pub const RESTORING: &str = "Restoring";
    pub const ADOPTING: &str = "Adopting";
    pub const STARTING: &str = "Starting";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
}

/// Whether a restore in `phase` holds the Machine reconciler's writes to the VM and disks:
/// from stopping the VM until the restored claims are the Machine's.
pub fn holds(phase: Option<&str>) -> bool {
    use restore_phase::{ADOPTING, RESTORING, STOPPING};
    matches!(phase, Some(STOPPING | RESTORING | ADOPTING))
}

/// A Machine's scheduled snapshots.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["schedule"]), transform = required_without_default)]
pub struct SnapshotSchedule {
    /// Standard five-field cron (minute hour day-of-month month day-of-week), in UTC, e.g.
    /// "0 2 * * *". After downtime, one snapshot catches up; missed runs are not replayed.
    #[serde(default)]
    #[schemars(extend("maxLength" = MAX_SCHEDULE))]
    pub schedule: String,
    /// Good (Succeeded) scheduled snapshots kept, 1-100 (default 7); the oldest are deleted
    /// first. A failed one is kept until `keep` newer good ones exist (and at most `keep` failed
    /// ones). Snapshots the operator's schedule did not make, or made for an earlier Machine of
    /// this name, are never counted nor deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = KEEP.0, "maximum" = KEEP.1))]
    pub keep: Option<i64>,
}

impl SnapshotSchedule {
    pub fn keep(&self) -> i64 {
        self.keep.unwrap_or(DEFAULT_KEEP)
    }
}

/// One of a Machine's newest snapshots, in its status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRef {
    pub name: String,
    /// When KubeVirt took it (else when it was asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    #[serde(default)]
    pub ready: bool,
    /// Taken of an earlier Machine of this name (deleted and made again): never pruned by this
    /// Machine's schedule.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub earlier_machine: bool,
}

/// A point-in-time copy of every disk of a Machine, through one KubeVirt
/// VirtualMachineSnapshot. It outlives its Machine.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vitistack.io",
    version = "v1alpha1",
    kind = "MachineSnapshot",
    plural = "machinesnapshots",
    shortname = "msnap",
    namespaced,
    status = "MachineSnapshotStatus",
    doc = "A point-in-time copy of every disk of a Machine (one KubeVirt VirtualMachineSnapshot). Deleting the Machine keeps it; deleting it deletes the VirtualMachineSnapshot.",
    printcolumn = r#"{"name":"Machine","type":"string","jsonPath":".spec.machineName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.readyToUse"}"#,
    printcolumn = r#"{"name":"Taken","type":"date","jsonPath":".status.creationTime"}"#,
    printcolumn = r#"{"name":"Error","type":"string","priority":1,"jsonPath":".status.error"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["machineName"]), transform = required_without_default)]
pub struct MachineSnapshotSpec {
    /// The Machine in this namespace whose disks are copied. Immutable.
    #[serde(default)]
    pub machine_name: String,
}

/// Mirrored from the VirtualMachineSnapshot; written by the operator only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSnapshotStatus {
    /// Pending, InProgress, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Whether a restore can use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// When KubeVirt took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<Time>,
    /// The disks it holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_SNAPSHOT_DISKS))]
    pub disks: Vec<String>,
    /// Why it failed or is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = MAX_ERROR))]
    pub error: Option<String>,
    /// The KubeVirt VirtualMachineSnapshot behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_snapshot_name: Option<String>,
    /// The uid of the Machine it was taken of (a restore takes it only for that Machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_uid: Option<String>,
    /// Why it failed or waits, as a word, when the operator decided it (NoVM, or why its
    /// Machine's remote cluster cannot be worked on: Unreachable, ClusterChanged, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The KubevirtConfig of the remote cluster it is taken on (none: the operator's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// That cluster's identity (its kube-system namespace's uid) when it was taken: a
    /// KubevirtConfig that reaches another cluster since does not hold it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_identity: Option<String>,
}

/// Puts a Machine's disks back to a MachineSnapshot of it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vitistack.io",
    version = "v1alpha1",
    kind = "MachineRestore",
    plural = "machinerestores",
    shortname = "mrestore",
    namespaced,
    status = "MachineRestoreStatus",
    doc = "Puts a Machine's disks back to one of its MachineSnapshots: stops the VM, restores every disk, makes the restored claims the Machine's disks, starts the VM again.",
    printcolumn = r#"{"name":"Machine","type":"string","jsonPath":".spec.machineName"}"#,
    printcolumn = r#"{"name":"Snapshot","type":"string","jsonPath":".spec.snapshotName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Completed","type":"date","jsonPath":".status.completedAt"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["machineName", "snapshotName"]), transform = required_without_default)]
pub struct MachineRestoreSpec {
    /// The Machine in this namespace to restore. Immutable.
    #[serde(default)]
    pub machine_name: String,
    /// A MachineSnapshot of that Machine, in this namespace. Immutable.
    #[serde(default)]
    pub snapshot_name: String,
    /// Allow a snapshot of an earlier Machine of this name (deleted and made again; listed with
    /// `earlierMachine: true` in the Machine's `status.snapshots`): its disks are restored into
    /// this Machine. The snapshot must be one the operator took of a Machine of this name in
    /// this namespace. Without it such a restore is refused. Immutable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_earlier_machine: bool,
    /// Keep the claims KubeVirt restored the disks into once the restore succeeded. By default
    /// they are deleted then: each is a full copy of its disk, and the disks are clones of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_restored_claims: bool,
}

/// On a MachineRestore until it ended with every disk present (see `crate::snapshots::restore`).
pub const RESTORE_FINALIZER: &str = "vitistack.io/restore";

/// On a MachineSnapshot taken on a remote cluster: held until its VirtualMachineSnapshot there
/// is deleted (no owner reference reaches across clusters, so no garbage collector does it).
pub const REMOTE_SNAPSHOT_FINALIZER: &str = "vitistack.io/remote-snapshot";

/// The restore's steps; written by the operator only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineRestoreStatus {
    /// Pending, Stopping, Restoring, Adopting, Starting, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Whether the VM ran when the restore began (at the end it runs as the Machine asks then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub was_running: Option<bool>,
    /// When it ended (succeeded or failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Why it failed, or what it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = MAX_ERROR))]
    pub error: Option<String>,
    /// The uid of the Machine restored, fixed when the restore leaves Pending: a Machine made
    /// again under that name is never touched by it. Always the Machine restored into, also when
    /// the snapshot is of an earlier Machine (`allowEarlierMachine`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_uid: Option<String>,
    /// Each disk: the claim KubeVirt restored it into and the uid of the claim it replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_SNAPSHOT_DISKS))]
    pub disks: Vec<RestoredDisk>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoredDisk {
    pub name: String,
    pub restored_claim: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_uid: Option<String>,
    /// The size of the claim it replaces (the disk may have grown since the snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// A disk with a source: `previousUid` is its DataVolume's, made again as a CDI clone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub data_volume: bool,
    /// The VolumeSnapshot KubeVirt restored it from (the restored claim's `dataSource`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot: Option<String>,
    /// The uid of the restored claim when the first old disk was deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_uid: Option<String>,
    /// The uid of the claim (or DataVolume) this restore made again under the disk's name: only
    /// that one is the restored disk, whatever else appears under the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_uid: Option<String>,
}

/// Parses a schedule: exactly five cron fields (no seconds, no year), in UTC. The error says
/// what is wrong in words a user can act on.
pub fn parse_schedule(schedule: &str) -> Result<croner::Cron, String> {
    let fields = schedule.split_whitespace().count();
    if fields != 5 {
        return Err(format!(
            "must be five cron fields (minute hour day-of-month month day-of-week, in UTC), \
             e.g. \"0 2 * * *\"; found {fields}"
        ));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(schedule)
        .map_err(|e| format!("is not a valid cron schedule: {e}"))
}
