//! What a Machine's snapshot schedule asks for at an instant (pure, table-tested in
//! `schedule/tests.rs`).
//!
//! The schedule is cron in UTC. Only the latest due time counts: after downtime one snapshot
//! catches up, the missed ones are not replayed in a burst. A schedule never fires for a time
//! before the Machine existed, nor sooner than the minimum interval after its last run.
//!
//! Only the operator's own scheduled snapshots of this very Machine (uid) are counted or deleted
//! ([`Own`]: their made-for proof verifies, see `super::scheduler`); labels and annotations are
//! descriptions anyone may write. Of those, only `Succeeded` ones count towards `keep`; a failed
//! one stays until `keep` newer good ones exist (and at most `keep` failed ones stay); one still
//! running is never deleted.

use chrono::{DateTime, NaiveDateTime, Utc};

#[cfg(test)]
mod tests;

/// How a scheduled snapshot ended, or that it has not yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    Running,
}

/// A scheduled snapshot the operator made for this Machine: its name, the due time it was made
/// for, and how it went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Own {
    pub name: String,
    pub due: DateTime<Utc>,
    pub outcome: Outcome,
}

/// What to do now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The due time to make a snapshot for.
    pub create: Option<DateTime<Utc>>,
    /// Own snapshots retention lets go, oldest first.
    pub delete: Vec<String>,
    /// When the schedule is next due.
    pub next: Option<DateTime<Utc>>,
}

/// A schedule's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Good snapshots kept (at least one).
    pub keep: usize,
    /// The least time between two runs: a schedule firing more often is clamped to it.
    pub min_interval: chrono::Duration,
}

/// Names tried in order before the one derived from the operator's key: `<base>`, `<base>-1`,
/// `<base>-2`.
pub const PREDICTABLE_NAMES: usize = 3;

/// The name of Machine `machine`'s scheduled snapshot due at `due`: `<machine>-<yyyymmddhhmm>`.
pub fn snapshot_name(machine: &str, due: DateTime<Utc>) -> String {
    format!("{machine}-{}", due.format("%Y%m%d%H%M"))
}

/// The names a scheduled snapshot due at `due` may take, in order: the plain one, a few
/// predictable suffixes, then `secret` (derived from the operator's key, so nobody can squat it
/// in advance). A name held by anything not ours is passed over, never a reason to skip.
pub fn candidates(machine: &str, due: DateTime<Utc>, secret: &str) -> Vec<String> {
    let base = snapshot_name(machine, due);
    let mut names = vec![base.clone()];
    names.extend((1..PREDICTABLE_NAMES).map(|i| format!("{base}-{i}")));
    names.push(format!("{base}-{secret}"));
    names
}

/// The due time in a name [`candidates`] made for Machine `machine`.
pub fn due_of(machine: &str, name: &str) -> Option<DateTime<Utc>> {
    let rest = name.strip_prefix(machine)?.strip_prefix('-')?;
    let (stamp, suffix) = rest.split_at_checked(12)?;
    let suffix_ok = suffix.is_empty()
        || suffix.strip_prefix('-').is_some_and(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    if !suffix_ok || !stamp.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    NaiveDateTime::parse_from_str(stamp, "%Y%m%d%H%M")
        .ok()
        .map(|t| t.and_utc())
}

/// After `failures` failed attempts in a row at a Machine's schedule (a namespace at its quota),
/// how long until the next: 30 s, doubling, at most 10 min.
pub fn retry_after(failures: u32) -> chrono::Duration {
    let doublings = failures.saturating_sub(1).min(5);
    (chrono::Duration::seconds(30) * (1 << doublings)).min(chrono::Duration::minutes(10))
}

/// The plan at `now` for a Machine created at `created`, with `cron` and `rules`, whose own
/// scheduled snapshots are `own`.
pub fn plan(
    created: DateTime<Utc>,
    cron: &croner::Cron,
    rules: Rules,
    own: &[Own],
    now: DateTime<Utc>,
) -> Plan {
    let latest = own.iter().map(|o| o.due).max();
    let create = cron
        .find_previous_occurrence(&now, true)
        .ok()
        .filter(|due| {
            *due >= created && latest.is_none_or(|l| *due > l && *due - l >= rules.min_interval)
        });
    Plan {
        create,
        delete: retention(rules.keep, own),
        next: cron.find_next_occurrence(&now, false).ok(),
    }
}

/// The own snapshots to delete, oldest first: good ones beyond the newest `keep`; failed ones
/// with `keep` newer good ones, and the oldest failed beyond `keep`. Running ones never.
pub fn retention(keep: usize, own: &[Own]) -> Vec<String> {
    let keep = keep.max(1);
    let mut all: Vec<&Own> = own.iter().collect();
    all.sort_by(|a, b| (a.due, &a.name).cmp(&(b.due, &b.name)));
    let of = |o: Outcome| all.iter().copied().filter(move |s| s.outcome == o);
    let good: Vec<&Own> = of(Outcome::Succeeded).collect();
    let mut gone: Vec<&Own> = good[..good.len().saturating_sub(keep)].to_vec();
    let newer_good = |f: &Own| {
        good.iter()
            .filter(|g| (g.due, &g.name) > (f.due, &f.name))
            .count()
    };
    let (superseded, failed): (Vec<&Own>, Vec<&Own>) =
        of(Outcome::Failed).partition(|f| newer_good(f) >= keep);
    gone.extend(superseded);
    gone.extend(&failed[..failed.len().saturating_sub(keep)]);
    gone.sort_by(|a, b| (a.due, &a.name).cmp(&(b.due, &b.name)));
    gone.into_iter().map(|o| o.name.clone()).collect()
}
