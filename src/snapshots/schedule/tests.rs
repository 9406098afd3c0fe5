use super::*;
use crate::api::snapshots::parse_schedule;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("time")
        .with_timezone(&Utc)
}

fn own(machine: &str, dues: &[(&str, Outcome)]) -> Vec<Own> {
    dues.iter()
        .map(|(d, outcome)| Own {
            name: snapshot_name(machine, at(d)),
            due: at(d),
            outcome: *outcome,
        })
        .collect()
}

fn good(machine: &str, dues: &[&str]) -> Vec<Own> {
    let d: Vec<(&str, Outcome)> = dues.iter().map(|d| (*d, Outcome::Succeeded)).collect();
    own(machine, &d)
}

const CREATED: &str = "2026-01-01T00:00:00Z";

fn rules(keep: usize) -> Rules {
    Rules {
        keep,
        min_interval: chrono::Duration::minutes(15),
    }
}

#[test]
fn what_is_due_at_an_instant() {
    let daily = parse_schedule("0 2 * * *").expect("cron");
    // (case, taken, now, due time to make, next)
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
            Some("2026-01-01T02:00:00Z"),
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
            Some("2026-01-04T02:00:00Z"),
            "2026-01-05T02:00:00Z",
        ),
        (
            "a schedule added to an older Machine: the latest due time, at once",
            &[],
            "2026-03-10T09:30:00Z",
            Some("2026-03-10T02:00:00Z"),
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
        let p = plan(at(CREATED), &daily, rules(7), &good("web", dues), at(now));
        assert_eq!(p.create, create.map(at), "{case}");
        assert_eq!(p.next, Some(at(next)), "{case}");
        assert!(p.delete.is_empty(), "{case}");
    }
}

#[test]
fn a_failed_or_running_run_stands_for_its_due_time() {
    let daily = parse_schedule("0 2 * * *").expect("cron");
    for outcome in [Outcome::Failed, Outcome::Running] {
        let o = own("web", &[("2026-01-01T02:00:00Z", outcome)]);
        let p = plan(
            at(CREATED),
            &daily,
            rules(7),
            &o,
            at("2026-01-01T03:00:00Z"),
        );
        assert_eq!(p.create, None, "{outcome:?}");
    }
}

#[test]
fn a_schedule_firing_more_often_than_the_minimum_interval_is_clamped_to_it() {
    let every_minute = parse_schedule("* * * * *").expect("cron");
    // (last run, now, made)
    let cases = [
        ("2026-01-01T02:00:00Z", "2026-01-01T02:01:00Z", None),
        ("2026-01-01T02:00:00Z", "2026-01-01T02:14:59Z", None),
        (
            "2026-01-01T02:00:00Z",
            "2026-01-01T02:15:00Z",
            Some("2026-01-01T02:15:00Z"),
        ),
        (
            "2026-01-01T02:00:00Z",
            "2026-01-01T03:07:30Z",
            Some("2026-01-01T03:07:00Z"),
        ),
    ];
    for (last, now, made) in cases {
        let p = plan(
            at(CREATED),
            &every_minute,
            rules(3),
            &good("web", &[last]),
            at(now),
        );
        assert_eq!(p.create, made.map(at), "{now}");
    }
    // No minimum: every minute.
    let p = plan(
        at(CREATED),
        &every_minute,
        Rules {
            keep: 3,
            min_interval: chrono::Duration::zero(),
        },
        &good("web", &["2026-01-01T02:00:00Z"]),
        at("2026-01-01T02:01:00Z"),
    );
    assert_eq!(p.create, Some(at("2026-01-01T02:01:00Z")));
}

#[test]
fn cron_is_utc_whatever_offset_the_instant_is_written_in() {
    let daily = parse_schedule("0 2 * * *").expect("cron");
    for (now, due) in [
        // 02:00 UTC, written in Tokyo and in New York.
        ("2026-03-10T11:00:00+09:00", "2026-03-10T02:00:00Z"),
        ("2026-03-09T21:00:00-05:00", "2026-03-10T02:00:00Z"),
        // 02:00 on a Tokyo wall clock is 17:00 UTC the day before: that day's run.
        ("2026-03-10T02:00:00+09:00", "2026-03-09T02:00:00Z"),
        // 02:00 on a New York wall clock is 07:00 UTC: the same day's run.
        ("2026-03-10T02:00:00-05:00", "2026-03-10T02:00:00Z"),
    ] {
        let p = plan(at(CREATED), &daily, rules(3), &[], at(now));
        assert_eq!(p.create, Some(at(due)), "{now}");
    }
}

#[test]
fn retention_counts_good_snapshots_only_and_keeps_failures_until_superseded() {
    use Outcome::{Failed as F, Running as R, Succeeded as S};
    let h = |n: u32| format!("2026-01-01T{n:02}:00:00Z");
    // (case, keep, own snapshots by hour, hours deleted)
    type Case<'a> = (&'a str, usize, &'a [(u32, Outcome)], &'a [u32]);
    let cases: &[Case] = &[
        ("within keep", 3, &[(1, S), (2, S), (3, S)], &[]),
        (
            "good beyond keep: the oldest go",
            2,
            &[(3, S), (1, S), (2, S), (4, S)],
            &[1, 2],
        ),
        (
            "keep failures in a row leave every good one",
            2,
            &[(1, S), (2, S), (3, F), (4, F)],
            &[],
        ),
        (
            "many failures: at most keep failed stay, the oldest go",
            2,
            &[(1, S), (2, S), (3, F), (4, F), (5, F), (6, F)],
            &[3, 4],
        ),
        (
            "a failure with keep newer good ones goes",
            2,
            &[(1, S), (2, F), (3, S), (4, S)],
            &[1, 2],
        ),
        (
            "a failure with fewer newer good ones stays",
            2,
            &[(1, S), (2, F), (3, S)],
            &[],
        ),
        (
            "running ones are never deleted nor counted",
            1,
            &[(1, R), (2, S), (3, R), (4, R)],
            &[],
        ),
        ("keep 0 is treated as 1", 0, &[(1, S), (2, S)], &[1]),
        ("nothing", 3, &[], &[]),
    ];
    for (case, keep, snaps, gone) in cases {
        let hours: Vec<(String, Outcome)> = snaps.iter().map(|(n, o)| (h(*n), *o)).collect();
        let list: Vec<(&str, Outcome)> = hours.iter().map(|(t, o)| (t.as_str(), *o)).collect();
        let expected: Vec<String> = gone
            .iter()
            .map(|n| snapshot_name("db", at(&h(*n))))
            .collect();
        assert_eq!(retention(*keep, &own("db", &list)), expected, "{case}");
    }
}

#[test]
fn names_are_tried_in_order_and_parsed_back() {
    let due = at("2026-01-02T02:00:00Z");
    let names = candidates("db", due, "k3y9x");
    assert_eq!(
        names,
        [
            "db-202601020200",
            "db-202601020200-1",
            "db-202601020200-2",
            "db-202601020200-k3y9x"
        ]
    );
    for n in &names {
        assert_eq!(due_of("db", n), Some(due), "{n}");
    }
    for (machine, name) in [
        ("db", "db-2026010202"),
        ("db", "db-202601020200-"),
        ("db", "db-202601020200-X"),
        ("db", "db-202601020200x"),
        ("db", "db-2026a1020200"),
        ("db", "db-202613020200"),
        ("db", "dbx-202601020200"),
        ("db-x", "db-202601020200"),
        ("db", "by-hand"),
    ] {
        assert_eq!(due_of(machine, name), None, "{machine} {name}");
    }
}

#[test]
fn a_failing_schedule_is_retried_with_backoff() {
    let secs: Vec<i64> = (1..=8).map(|n| retry_after(n).num_seconds()).collect();
    assert_eq!(secs, [30, 60, 120, 240, 480, 600, 600, 600]);
    assert_eq!(retry_after(0).num_seconds(), 30);
    assert_eq!(retry_after(u32::MAX).num_seconds(), 600);
}
