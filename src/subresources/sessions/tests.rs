use std::time::Duration;

use super::*;

const LIMITS: Limits = Limits {
    per_user: 2,
    total: 3,
    idle: Duration::from_secs(60),
    max_length: Duration::from_secs(3600),
};

#[test]
fn a_session_opens_within_the_user_and_replica_caps_and_not_while_draining() {
    let cases = [
        ("first of all", (0, 0, false), Ok(())),
        ("user's second", (1, 1, false), Ok(())),
        ("user at cap", (2, 2, false), Err(Refusal::UserCap(2))),
        ("replica at cap", (3, 0, false), Err(Refusal::TotalCap(3))),
        (
            "user cap named first",
            (3, 2, false),
            Err(Refusal::UserCap(2)),
        ),
        ("draining", (0, 0, true), Err(Refusal::Draining)),
        ("draining beats caps", (3, 2, true), Err(Refusal::Draining)),
    ];
    for (case, (open, of_user, draining), want) in cases {
        assert_eq!(admit(&LIMITS, open, of_user, draining), want, "{case}");
    }
}

fn seen(age: u64, idle_for: u64, machine: Seen, vmi: Seen, draining: bool) -> Observed {
    Observed {
        age: Duration::from_secs(age),
        idle_for: Duration::from_secs(idle_for),
        machine,
        vmi,
        draining,
    }
}

#[test]
fn a_session_ends_by_the_first_rule_that_holds() {
    use Seen::{Gone, There, Unknown};
    let cases = [
        ("fresh", seen(0, 0, There, There, false), None),
        ("busy and young", seen(3599, 59, There, There, false), None),
        (
            "API outage keeps it",
            seen(10, 0, Unknown, Unknown, false),
            None,
        ),
        ("idle", seen(100, 60, There, There, false), Some(End::Idle)),
        (
            "too long",
            seen(3600, 0, There, There, false),
            Some(End::MaxLength),
        ),
        (
            "length before idle",
            seen(3600, 60, There, There, false),
            Some(End::MaxLength),
        ),
        (
            "VMI gone",
            seen(10, 0, There, Gone, false),
            Some(End::VmiGone),
        ),
        (
            "VMI gone, Machine unknown",
            seen(10, 0, Unknown, Gone, false),
            Some(End::VmiGone),
        ),
        (
            "Machine deleted",
            seen(10, 0, Gone, There, false),
            Some(End::MachineDeleted),
        ),
        (
            "Machine before VMI",
            seen(10, 0, Gone, Gone, false),
            Some(End::MachineDeleted),
        ),
        (
            "draining before all",
            seen(3600, 60, Gone, Gone, true),
            Some(End::Draining),
        ),
    ];
    for (case, observed, want) in cases {
        assert_eq!(should_end(&LIMITS, &observed), want, "{case}");
    }
}

#[test]
fn the_next_look_comes_no_later_than_a_timeout() {
    let secs = Duration::from_secs;
    assert_eq!(next_look(&LIMITS, secs(0), secs(0)), CHECK_EVERY);
    assert_eq!(next_look(&LIMITS, secs(0), secs(58)), secs(2), "idle soon");
    assert_eq!(next_look(&LIMITS, secs(3597), secs(0)), secs(3), "max soon");
    assert_eq!(next_look(&LIMITS, secs(4000), secs(0)), secs(0), "overdue");
}

#[test]
fn reasons_are_one_vocabulary() {
    let mut names: Vec<&str> = End::ALL.iter().map(|e| e.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), End::ALL.len(), "distinct end reasons");
    // A refusal for draining and an end by draining are the same word.
    assert_eq!(Refusal::Draining.as_str(), End::Draining.as_str());
    for end in End::ALL {
        // The close frame's reason must fit its 123 bytes.
        assert!(end.as_str().len() <= 123);
        assert_eq!(
            end.close_code(),
            if end == End::Draining { 1001 } else { 1000 }
        );
    }
    assert_eq!(Kind::parse("console"), Some(Kind::Console));
    assert_eq!(Kind::parse("vnc"), Some(Kind::Vnc));
    assert_eq!(Kind::parse("pause"), None);
}
