//! Each promise of docs/user/snapshots-and-restores.md (a phrase of the page, whitespace aside)
//! and the tests that show it, as `path::fn` from the repository's root.

type Pin = (&'static str, &'static [&'static str]);

const TRUST: &str = "tests/snapshot_trust_e2e.rs::forged_squatted_failed_and_predecessors_snapshots_leave_the_backups";
const OWN: &str =
    "src/snapshots/scheduler/seen.rs::only_snapshots_proven_for_a_machine_uid_are_its_own";
const RETENTION: &str = "src/snapshots/schedule/tests.rs::retention_counts_good_snapshots_only_and_keeps_failures_until_superseded";
const DUE: &str = "src/snapshots/schedule/tests.rs::what_is_due_at_an_instant";
const FORGED_READY: &str =
    "tests/snapshots_e2e/evidence.rs::a_forged_scheduled_snapshot_moves_nothing";
const AFTER_COMMIT: &str = "src/snapshots/restore/tests/trust.rs::after_the_commit_point_every_failure_waits_holding_the_machine";
const BEFORE_COMMIT: &str = "src/snapshots/restore/tests/trust.rs::before_the_commit_point_a_restore_ends_with_the_old_disks";
const PROVEN: &str = "src/snapshots/restore/tests/trust.rs::nothing_is_deleted_for_a_restored_claim_not_proven_kubevirts_and_bound";
const ENDED: &str = "src/snapshots/restore/tests/trust.rs::an_ended_restore_deletes_its_restored_claims_then_lets_go";
const LOST: &str = "src/snapshots/restore/tests/later.rs::a_lost_restored_claim_never_frees_the_machine_to_make_an_empty_disk";
const E2E_LOST: &str = "tests/restores_e2e/interrupted.rs::a_restored_claim_lost_after_its_old_claim_was_deleted_is_never_made_empty";
const REPLACE: &str =
    "tests/restores_e2e/replace.rs::a_restore_replaces_the_disks_and_a_failed_one_leaves_them";
const SOURCES: &str =
    "tests/restores_e2e/sources.rs::a_disk_with_a_source_is_restored_and_a_cdrom_left_on_its_image";
const PLANTED_RESTORED: &str =
    "tests/restore_trust_e2e.rs::a_claim_planted_under_the_restored_name_is_never_mounted";
const PLANTED_DISK: &str =
    "tests/restore_trust_e2e.rs::a_claim_planted_under_the_disk_name_is_never_mounted";
const NO_API: &str =
    "tests/restore_trust_e2e.rs::a_leader_without_the_snapshot_api_never_fails_an_adopting_restore";
const DELETED_RESTORE: &str =
    "tests/restore_trust_e2e.rs::deleting_a_machinerestore_mid_adopting_waits_for_every_disk";
const DELETED_MACHINE: &str =
    "tests/restore_trust_e2e.rs::deleting_a_retain_disks_machine_mid_restore_waits_for_the_restore";
const WFFC: &str = "tests/restore_trust_e2e.rs::a_wait_for_first_consumer_class_restores_and_boots";
const EARLIER_E2E: &str = "tests/restores_e2e/earlier.rs::an_earlier_machines_snapshot_is_restored_into_the_new_machine_only_when_asked";
const EARLIER: &str = "src/snapshots/restore/tests/earlier.rs::an_earlier_machines_snapshot_is_restored_only_when_allowed_and_proven";
const REMOTE_E2E: &str = "tests/remote_snapshots_e2e.rs::a_snapshot_and_a_restore_of_a_remote_machine_run_on_its_cluster";
const REMOTE_GOES: &str = "src/snapshots/snapshot/remote.rs::a_remote_snapshot_goes_with_its_virtual_machine_snapshot_there";
const SITE: &str = "src/snapshots/site.rs::work_runs_where_the_machine_is_or_waits_saying_why";
const LISTED: &str =
    "src/reconciler/decide/status/snapshots.rs::an_earlier_machines_snapshots_are_listed_apart";

pub const PINS: &[Pin] = &[
    // Snapshot
    (
        "Deleting the Machine keeps its snapshots and their VirtualMachineSnapshots",
        &["tests/snapshots_e2e.rs::snapshots_of_a_machine_and_who_may_take_and_restore_them"],
    ),
    (
        "deleting a MachineSnapshot deletes its VirtualMachineSnapshot (the garbage collector, through the owner reference)",
        &["tests/snapshots_e2e.rs::snapshots_of_a_machine_and_who_may_take_and_restore_them"],
    ),
    (
        "of the Machine's VM (only a VM proven the Machine's)",
        &["tests/snapshots_e2e/evidence.rs::a_vm_not_proven_the_machines_is_never_snapshotted"],
    ),
    // Schedule
    (
        "After downtime only the latest missed time is taken, once: no burst.",
        &[
            DUE,
            "tests/snapshot_schedule_e2e.rs::a_schedule_takes_snapshots_when_due_and_keeps_keep",
        ],
    ),
    (
        "A schedule never fires for a time before the Machine existed (adding one to an older Machine takes one at once, for the latest due time).",
        &[DUE],
    ),
    (
        "What counts as a scheduled snapshot is decided on evidence, never on the label or the annotation (anyone who may create MachineSnapshots can set those; they are descriptions only).",
        &[OWN, TRUST, FORGED_READY],
    ),
    (
        "`keep` counts only the operator's own snapshots of this Machine's uid, and only `Succeeded` ones count towards it; beyond it the oldest good ones are deleted (by uid).",
        &[
            OWN,
            RETENTION,
            TRUST,
            "tests/snapshot_schedule_e2e.rs::a_schedule_takes_snapshots_when_due_and_keeps_keep",
        ],
    ),
    (
        "A `Failed` one stays until `keep` newer good ones exist, and at most `keep` failed ones are kept; a snapshot still being taken is never deleted.",
        &[RETENTION, TRUST],
    ),
    (
        "`keep` failures in a row never rotate out a good backup.",
        &[RETENTION, TRUST],
    ),
    (
        "Snapshots made by hand, or labelled and annotated by hand (even with a far-future `scheduled-for`), are never counted, never deleted, and never stop a run.",
        &[OWN, TRUST],
    ),
    (
        "takes the next free name (`-1`, `-2`, then a suffix derived from the operator's key): a run is never skipped.",
        &[
            TRUST,
            "src/snapshots/schedule/tests.rs::names_are_tried_in_order_and_parsed_back",
        ],
    ),
    (
        "A Machine deleted and made again under the same name owns none of its predecessor's snapshots: its schedule never prunes them, and `status.snapshots` lists them after its own with `earlierMachine: true` (at most five of each).",
        &[OWN, TRUST, LISTED],
    ),
    (
        "A schedule never fires more often than `--min-snapshot-interval` (default 15 minutes, `0s` for none;",
        &[
            "src/snapshots/schedule/tests.rs::a_schedule_firing_more_often_than_the_minimum_interval_is_clamped_to_it",
            "src/cli.rs::the_minimum_snapshot_interval_may_be_zero",
        ],
    ),
    (
        "at most `--max-snapshots-in-flight` scheduled snapshots (default 10) are being taken at once, the longest due first.",
        &[
            "tests/snapshot_trust_e2e/bounds.rs::at_most_max_in_flight_scheduled_snapshots_are_taken_at_once",
            "tests/snapshot_trust_e2e/bounds.rs::the_longest_due_is_taken_first",
            "tests/snapshot_trust_e2e/bounds.rs::a_namespace_at_its_snapshot_quota_delays_no_other_namespace",
        ],
    ),
    (
        "One Machine's failure (its namespace at its quota, for example) neither stops nor delays another Machine's snapshot (a create that failed holds no slot): it is tried again after 30 s, doubling up to 10 minutes.",
        &[
            "tests/snapshot_trust_e2e/bounds.rs::a_namespace_at_its_snapshot_quota_delays_no_other_namespace",
            "src/snapshots/schedule/tests.rs::a_failing_schedule_is_retried_with_backoff",
        ],
    ),
    (
        "A snapshot KubeVirt has not finished is looked at again with backoff (10 s doubling up to 5 minutes); one whose Machine has no VM on its cluster ends `Failed` with `status.reason: NoVM` after 30 minutes.",
        &[
            "tests/snapshot_pending_e2e.rs::a_snapshot_of_a_machine_without_a_vm_backs_off_then_fails",
            "src/snapshots/mirror.rs::a_snapshot_waiting_for_a_vm_backs_off_then_fails",
        ],
    ),
    (
        "Schedules are checked every `RECONCILE_INTERVAL`, at most every 30 s.",
        &[
            "src/snapshots/context.rs::schedules_are_checked_every_reconcile_interval_at_most_every_30_s",
        ],
    ),
    (
        "Scheduled snapshots made before this rule carry no proof: they are never pruned and can be deleted by hand.",
        &[OWN, TRUST],
    ),
    // Restore
    (
        "From `Stopping` to `Adopting` the reconciler leaves the VM and disks alone",
        &[
            "src/snapshots/restore/tests/trust.rs::only_the_middle_steps_hold_the_reconciler",
            REPLACE,
        ],
    ),
    (
        "The restore is of the Machine it began with: its uid is recorded (`status.machineUid`) when it leaves `Pending`, and a Machine made again under that name is not touched.",
        &[
            "src/snapshots/restore/tests/trust.rs::what_is_not_the_machines_fails_a_restore_only_before_the_commit_point",
            "src/snapshots/restore/tests/earlier.rs::past_pending_an_earlier_machines_restore_binds_to_the_new_machines_uid",
        ],
    ),
    (
        "its old claim `<machine>-<disk>` is deleted (exactly the one recorded, by uid) and made again as a clone of its restored claim (`dataSource`), at the larger of the two sizes",
        &[
            "src/snapshots/restore/tests/later.rs::adopting_replaces_each_claim_once_and_only_the_recorded_one",
            "src/snapshots/restorer/again.rs::the_larger_size_wins",
            REPLACE,
        ],
    ),
    (
        "its DataVolume `<machine>-<disk>` is deleted (exactly the one recorded, by uid, and only when proven the Machine's)",
        &[
            "src/snapshots/restore/tests/later.rs::adopting_a_disk_with_a_source_replaces_its_data_volume_once_cdis_claim_is_gone",
            SOURCES,
        ],
    ),
    (
        "The reconciler keeps that DataVolume as it is",
        &[
            "src/reconciler/decide/tests/data_volumes.rs::a_data_volume_a_restore_made_again_keeps_its_clone_source",
        ],
    ),
    (
        "a CD-ROM is read-only media imported from its source: nothing of it is restored.",
        &[SOURCES],
    ),
    (
        "It gets no override, its DataVolume is never touched, and the VM mounts it again in `Starting`;",
        &[SOURCES],
    ),
    (
        "a restore refuses the earlier one's snapshots unless its author asks for them",
        &[EARLIER, EARLIER_E2E],
    ),
    (
        "the operator must prove it took it of that earlier Machine",
        &[
            EARLIER,
            "src/snapshots/snapshot/tests.rs::only_the_operators_proof_on_the_snapshot_it_made_says_what_it_was_taken_of",
        ],
    ),
    (
        "is not proven taken by the operator ...`), nothing touched.",
        &[EARLIER],
    ),
    (
        "must be controlled by the new Machine's VM",
        &[
            "src/snapshots/restore/tests/earlier.rs::past_pending_an_earlier_machines_restore_binds_to_the_new_machines_uid",
            EARLIER_E2E,
        ],
    ),
    (
        "**The commit point** is the first old disk deleted.",
        &[PROVEN],
    ),
    (
        "a claim planted under the predictable restored name (even with the annotation and the made-for proof copied) ends the restore `Failed` with the old disks untouched, and a restored claim not bound yet is waited for",
        &[PROVEN, PLANTED_RESTORED],
    ),
    (
        "On `WaitForFirstConsumer` storage, where a claim binds only once a pod mounting it is scheduled, the restore binds its claims with a Pod of its own, `<restore>-bind` (controlled by the MachineRestore, as restricted as a Pod can be, mounting the claims read-only, deleted once they are bound);",
        &[
            "src/snapshots/restore/tests/binder.rs::a_consumer_pod_binds_the_unbound_claims_then_goes_before_the_next_step",
            WFFC,
        ],
    ),
    (
        "ends it `Failed` with the old disks untouched, and the reconciler puts the VM back on them.",
        &[BEFORE_COMMIT, REPLACE],
    ),
    (
        "After it nothing frees the Machine before every disk is back;",
        &[AFTER_COMMIT, NO_API, DELETED_RESTORE, DELETED_MACHINE],
    ),
    (
        "each obstacle keeps the restore in `Adopting`, holding the Machine, with its `error` (and the Machine's `Restoring` message) saying what and how to go on:",
        &[AFTER_COMMIT],
    ),
    (
        "a restored claim lost after its old disk was deleted: `data lost: the restored claim(s)",
        &[AFTER_COMMIT, LOST, E2E_LOST],
    ),
    (
        "nothing empty (or imported again) is made in its place.",
        &[LOST, E2E_LOST],
    ),
    (
        "a claim planted there between the deletion and the making again, with the made-for proof copied, is never mounted;",
        &[AFTER_COMMIT, PLANTED_DISK],
    ),
    (
        "A restore that reached `Adopting` goes on whatever happens around it: a leader that starts without KubeVirt's snapshot API, a deleted MachineRestore (it carries the finalizer `vitistack.io/restore`, removed once the restore ended with every disk present;",
        &[
            NO_API,
            DELETED_RESTORE,
            "src/snapshots/restore/tests/trust.rs::a_restore_is_held_by_its_finalizer_until_it_ended",
        ],
    ),
    (
        "a deleted Machine (its deletion, even with `vitistack.io/retain-disks`, waits while a restore is `Stopping`, `Restoring` or `Adopting`;",
        &[
            DELETED_MACHINE,
            "src/snapshots/restore/tests/trust.rs::starting_ends_once_a_deleted_machine_has_its_disks_back",
        ],
    ),
    (
        "one not past the commit point then fails with the old disks, one past it finishes, and the disks are then deleted or kept as the Machine says).",
        &[BEFORE_COMMIT, DELETED_MACHINE],
    ),
    (
        "A restored claim lost while its old disk is still there, after other disks were replaced, ends `Failed`: that disk keeps its data from before the restore, and the error says so.",
        &[LOST],
    ),
    (
        "Each disk made again must be bound (a DataVolume `Succeeded`) before the VM starts on it.",
        &[AFTER_COMMIT, WFFC],
    ),
    (
        "Once `Succeeded`, the restored claims recorded at the commit point (by uid) are deleted: each is a full copy of its disk.",
        &[ENDED, DELETED_RESTORE],
    ),
    (
        "`spec.keepRestoredClaims: true` keeps them (as KubeVirt made them, controlled by the VM);",
        &[ENDED, PLANTED_DISK],
    ),
    (
        "a failed restore keeps them too, for a look.",
        &[ENDED, PLANTED_RESTORED],
    ),
    // A remote Machine's snapshots and restores
    (
        "it is this MachineSnapshot's only if it carries the operator's `vitistack.io/taken-of` proof for this MachineSnapshot's name and uid.",
        &[REMOTE_GOES, REMOTE_E2E],
    ),
    (
        "Anything else of those names is never touched.",
        &[REMOTE_GOES, REMOTE_E2E],
    ),
    (
        "deleting it deletes its VirtualMachineSnapshot there (by uid), then the finalizer goes.",
        &[REMOTE_GOES, REMOTE_E2E],
    ),
    (
        "While the cluster cannot be reached the deletion waits, saying so in `status.error`;",
        &[REMOTE_GOES, REMOTE_E2E],
    ),
    (
        "Nothing is read or written on a cluster that cannot be worked on:",
        &[
            SITE,
            "src/snapshots/mirror.rs::a_snapshot_waits_for_its_cluster_then_fails_with_its_reason",
        ],
    ),
    (
        "A restore waits in the step it is in, `status.error` naming the cluster and the reason.",
        &[SITE],
    ),
    (
        "A snapshot is restored only on the cluster it was taken on:",
        &["src/snapshots/site.rs::a_snapshot_is_restored_only_on_the_cluster_it_was_taken_on"],
    ),
    // On the Machine
    (
        "`status.snapshots` lists its five newest MachineSnapshots, newest first (name, time KubeVirt took it, or when it was asked for, ready), then at most five of earlier Machines of the same name, flagged `earlierMachine: true`.",
        &[
            "src/reconciler/decide/status/snapshots.rs::the_newest_few_are_listed_newest_first",
            LISTED,
        ],
    ),
    (
        "one labelled scheduled by anyone else moves neither `SnapshotsReady` nor the entries of the schedule's snapshots.",
        &[
            FORGED_READY,
            "src/reconciler/decide/status/snapshots.rs::snapshots_ready_says_whether_the_schedule_works",
        ],
    ),
    (
        "Only one restore of a Machine runs at a time: a later one waits in `Pending`, naming the one under way.",
        &[
            "src/snapshots/restore/tests/pending.rs::pending_checks_the_machine_and_the_snapshot_before_stopping",
        ],
    ),
];
