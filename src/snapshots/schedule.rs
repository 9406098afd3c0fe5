//! What a Machine's snapshot schedule asks for at an instant (pure, table-tested below).
//!
//! The schedule is cron in UTC. Only the latest due time counts: after downtime one snapshot
//! catches up, the missed ones are not replayed in a burst. `keep` counts only the scheduled
//! snapshots of the Machine (the label [`SCHEDULED_LABEL`](crate::api::snapshots::SCHEDULED_LABEL));
//! the oldest go first. A schedule never fires for a time before the Machine existed.

use chrono::{DateTime, Utc};

/// A scheduled snapshot that exists: its name and the due time it was made for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    pub name: String,
    pub due: DateTime<Utc>,
}

/// What to do now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// A snapshot to make: its name and the due time it is for.
    pub create: Option<Taken>,
    /// Scheduled snapshots beyond `keep`, oldest first.
    pub delete: Vec<String>,
    /// When the schedule is next due (to wake up then).
    pub next: Option<DateTime<Utc>>,
}

/// The name of Machine `machine`'s scheduled snapshot due at `due`: `<machine>-<yyyymmddhhmm>`.
pub fn snapshot_name(machine: &str, due: DateTime<Utc>) -> String {
    format!("{machine}-{}", due.format("%Y%m%d%H%M"))
}

/// The plan at `now` for a Machine created at `created`, with `cron`, keeping `keep` scheduled
/// snapshots of which `taken` exist.
pub fn plan(
    machine: &str,
    created: DateTime<Utc>,
    cron: &croner::Cron,
    keep: usize,
    taken: &[Taken],
    now: DateTime<Utc>,
) -> Plan {
    let latest = taken.iter().map(|t| t.due).max();
    let create = cron
        .find_previous_occurrence(&now, true)
        .ok()
        .filter(|due| *due >= created && latest.is_none_or(|l| *due > l))
        .map(|due| Taken {
            name: snapshot_name(machine, due),
            due,
        })
        // A snapshot of that name made by hand (or left over) stands for it.
        .filter(|c| taken.iter().all(|t| t.name != c.name));
    let mut all: Vec<&Taken> = taken.iter().chain(create.as_ref()).collect();
    all.sort_by(|a, b| (a.due, &a.name).cmp(&(b.due, &b.name)));
    let excess = all.len().saturating_sub(keep.max(1));
    Plan {
        delete: all[..excess].iter().map(|t| t.name.clone()).collect(),
        create,
        next: cron.find_next_occurrence(&now, false).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::snapshots::parse_schedule;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("time")
            .with_timezone(&Utc)
    }

    fn taken(machine: &str, dues: &[&str]) -> Vec<Taken> {
        dues.iter()
            .map(|d| Taken {
                name: snapshot_name(machine, at(d)),
                due: at(d),
            })
            .collect()
    }

    const CREATED: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn what_is_due_at_an_instant() {
        let daily = parse_schedule("0 2 * * *").expect("cron");
        // (case, taken, now, created name, next)
        type Case<'a> = (&'a str, &'a [&'a str], &'a str, Option<&'a str>, &'a str);
        let cases: &[Case] = &[
            (
                "before the first due time",
                &[],
                "2026-01-01T01:59:59Z",
                None,
                "2026-01-01T02:00:00Z",
            ),
            (
                "at the due time",
                &[],
                "2026-01-01T02:00:00Z",
                Some("web-202601010200"),
                "2026-01-02T02:00:00Z",
            ),
            (
                "already taken",
                &["2026-01-01T02:00:00Z"],
                "2026-01-01T14:00:00Z",
                None,
                "2026-01-02T02:00:00Z",
            ),
            (
                "after three days down: one catch-up, for the latest due time",
                &["2026-01-01T02:00:00Z"],
                "2026-01-04T09:30:00Z",
                Some("web-202601040200"),
                "2026-01-05T02:00:00Z",
            ),
            (
                "a schedule added to an older Machine: the latest due time, at once",
                &[],
                "2026-03-10T09:30:00Z",
                Some("web-202603100200"),
                "2026-03-11T02:00:00Z",
            ),
            (
                "a due time before the Machine existed never fires",
                &[],
                "2025-12-31T23:00:00Z",
                None,
                "2026-01-01T02:00:00Z",
            ),
        ];
        for (case, dues, now, create, next) in cases {
            let p = plan("web", at(CREATED), &daily, 7, &taken("web", dues), at(now));
            assert_eq!(
                p.create.as_ref().map(|c| c.name.as_str()),
                *create,
                "{case}"
            );
            assert_eq!(p.next, Some(at(next)), "{case}");
            assert!(p.delete.is_empty(), "{case}");
        }
    }

    #[test]
    fn cron_is_utc_whatever_offset_the_instant_is_written_in() {
        let daily = parse_schedule("0 2 * * *").expect("cron");
        for (now, due) in [
            // 02:00 UTC, written in Tokyo and in New York.
            ("2026-03-10T11:00:00+09:00", "web-202603100200"),
            ("2026-03-09T21:00:00-05:00", "web-202603100200"),
            // 02:00 on a Tokyo wall clock is 17:00 UTC the day before: that day's run.
            ("2026-03-10T02:00:00+09:00", "web-202603090200"),
            // 02:00 on a New York wall clock is 07:00 UTC: the same day's run.
            ("2026-03-10T02:00:00-05:00", "web-202603100200"),
        ] {
            let p = plan("web", at(CREATED), &daily, 3, &[], at(now));
            assert_eq!(p.create.map(|c| c.name), Some(due.to_owned()), "{now}");
        }
    }

    #[test]
    fn keep_counts_scheduled_snapshots_and_deletes_the_oldest_first() {
        let hourly = parse_schedule("0 * * * *").expect("cron");
        let have = taken(
            "db",
            &[
                "2026-01-01T03:00:00Z",
                "2026-01-01T01:00:00Z",
                "2026-01-01T02:00:00Z",
            ],
        );
        // A fourth is due: with keep 3 the oldest goes.
        let p = plan(
            "db",
            at(CREATED),
            &hourly,
            3,
            &have,
            at("2026-01-01T04:00:05Z"),
        );
        assert_eq!(p.create.map(|c| c.name), Some("db-202601010400".into()));
        assert_eq!(p.delete, vec!["db-202601010100".to_owned()]);
        // keep lowered to 1: every older one goes, the new one stays.
        let p = plan(
            "db",
            at(CREATED),
            &hourly,
            1,
            &have,
            at("2026-01-01T04:00:05Z"),
        );
        assert_eq!(
            p.delete,
            vec![
                "db-202601010100".to_owned(),
                "db-202601010200".to_owned(),
                "db-202601010300".to_owned()
            ]
        );
        // Nothing due, within keep: nothing deleted.
        let p = plan(
            "db",
            at(CREATED),
            &hourly,
            3,
            &have,
            at("2026-01-01T03:30:00Z"),
        );
        assert_eq!(
            p,
            Plan {
                next: Some(at("2026-01-01T04:00:00Z")),
                ..Plan::default()
            }
        );
    }

    #[test]
    fn a_snapshot_already_named_for_the_due_time_stands_for_it() {
        let daily = parse_schedule("0 2 * * *").expect("cron");
        // Listed with an older due time (its annotation was edited): not made twice.
        let have = vec![Taken {
            name: "web-202601020200".into(),
            due: at("2026-01-01T02:00:00Z"),
        }];
        let p = plan(
            "web",
            at(CREATED),
            &daily,
            7,
            &have,
            at("2026-01-02T02:00:00Z"),
        );
        assert_eq!(p.create, None);
    }
}
