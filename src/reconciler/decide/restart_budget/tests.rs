use super::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

mod gate;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).expect("time")
}

fn key(ns: &str, name: &str) -> Key {
    (ns.to_owned(), name.to_owned())
}

fn limits(global: u32, per_namespace: u32) -> Limits {
    Limits {
        global,
        per_namespace,
        timeout: Duration::from_secs(600),
    }
}

/// `restarting`: (ns, name, since); `queue`: (ns, name, due).
fn state(restarting: &[(&str, &str, i64)], queue: &[(&str, &str, i64)]) -> State {
    State {
        restarting: (restarting.iter())
            .map(|(ns, n, s)| {
                let slot = Slot {
                    since: at(*s),
                    vmi_uid: Some(format!("old-{n}")),
                };
                (key(ns, n), slot)
            })
            .collect(),
        queue: queue
            .iter()
            .map(|(ns, n, d)| (key(ns, n), at(*d)))
            .collect(),
    }
}

fn place(v: &Verdict) -> Option<(usize, usize)> {
    match v {
        Verdict::Go => None,
        Verdict::Wait {
            position, queued, ..
        } => Some((*position, *queued)),
    }
}

/// (row, state, limits, asking (ns, name, due), now, expected place: None = go)
type Row = (
    &'static str,
    State,
    Limits,
    (&'static str, &'static str, i64),
    i64,
    Option<(usize, usize)>,
);

#[test]
fn the_queue() {
    let a = "team-a";
    let b = "team-b";
    let rows: Vec<Row> = vec![
        (
            "a free slot",
            state(&[], &[]),
            limits(3, 0),
            (a, "m1", 0),
            0,
            None,
        ),
        (
            "the global cap reached: first in line",
            state(&[(a, "r1", 0), (a, "r2", 0), (b, "r3", 0)], &[]),
            limits(3, 0),
            (a, "m1", 5),
            5,
            Some((1, 1)),
        ),
        (
            "no cap: 0 is unlimited",
            state(&[(a, "r1", 0), (a, "r2", 0), (b, "r3", 0)], &[]),
            limits(0, 0),
            (a, "m1", 5),
            5,
            None,
        ),
        (
            "the namespace's cap reached, the global not",
            state(&[(a, "r1", 0)], &[]),
            limits(3, 1),
            (a, "m1", 5),
            5,
            Some((1, 1)),
        ),
        (
            "another namespace goes past it",
            state(&[(a, "r1", 0)], &[(a, "w1", 1)]),
            limits(3, 1),
            (b, "m1", 5),
            5,
            None,
        ),
        (
            "FIFO: a slot freed goes to the first in line, not to a later one",
            state(&[(a, "r1", 0), (a, "r2", 0)], &[(a, "w1", 1), (b, "w2", 2)]),
            limits(3, 0),
            (a, "m1", 5),
            5,
            Some((3, 3)),
        ),
        (
            "FIFO: the first in line takes the free slot",
            state(&[(a, "r1", 0), (a, "r2", 0)], &[(a, "w1", 1), (b, "w2", 2)]),
            limits(3, 0),
            (a, "w1", 1),
            5,
            None,
        ),
        (
            "FIFO: the second waits behind the first",
            state(&[(a, "r1", 0), (a, "r2", 0)], &[(a, "w1", 1), (b, "w2", 2)]),
            limits(3, 0),
            (b, "w2", 2),
            5,
            Some((2, 2)),
        ),
        (
            "a place is kept: asking again later keeps the first due time",
            state(&[(a, "r1", 0)], &[(a, "w1", 3), (a, "w2", 4)]),
            limits(1, 0),
            (a, "w1", 9),
            9,
            Some((1, 2)),
        ),
        (
            "a timeout frees a slot",
            state(&[(a, "r1", 0), (a, "r2", 500)], &[]),
            limits(2, 0),
            (a, "m1", 601),
            601,
            None,
        ),
        (
            "within the timeout the slot is held",
            state(&[(a, "r1", 0), (a, "r2", 500)], &[]),
            limits(2, 0),
            (a, "m1", 599),
            599,
            Some((1, 1)),
        ),
        (
            "a Machine holding a slot goes again",
            state(&[(a, "m1", 0)], &[]),
            limits(1, 1),
            (a, "m1", 0),
            10,
            None,
        ),
    ];
    for (row, mut s, l, (ns, name, due), now, want) in rows {
        s.expire(&l, at(now));
        let verdict = admit(&s, &key(ns, name), at(due), &l);
        assert_eq!(place(&verdict), want, "{row}: {verdict:?}");
    }
}

#[test]
fn a_machine_deleted_while_queued_gives_its_place_up() {
    let l = limits(1, 0);
    let mut s = state(&[("a", "r1", 0)], &[("a", "gone", 1), ("a", "next", 2)]);
    s.forget(&key("a", "r1"));
    let next = |s: &State| place(&admit(s, &key("a", "next"), at(2), &l));
    assert_eq!(
        next(&s),
        Some((2, 2)),
        "the slot freed is kept for the first in line"
    );
    s.forget(&key("a", "gone"));
    assert_eq!(next(&s), None, "the first in line deleted: the next goes");
}

#[test]
fn a_restart_ends_when_a_new_vmi_runs() {
    let k = key("a", "m1");
    let vmi = |uid: &str, running, deleting| Vmi {
        uid: uid.to_owned(),
        running,
        deleting,
    };
    // (row, uid of the VMI deleted (None: rebuilt by a new leader), the VMI now, over)
    let known = Some("old-m1");
    let rows = [
        ("no VMI yet", known, None, false),
        (
            "the deleted one still seen",
            known,
            Some(vmi("old-m1", true, false)),
            false,
        ),
        (
            "the deleted one shutting down",
            known,
            Some(vmi("old-m1", true, true)),
            false,
        ),
        (
            "a new one, not Running yet",
            known,
            Some(vmi("new", false, false)),
            false,
        ),
        (
            "a new one Running",
            known,
            Some(vmi("new", true, false)),
            true,
        ),
        ("rebuilt: no VMI yet", None, None, false),
        (
            "rebuilt: the old one shutting down",
            None,
            Some(vmi("old-m1", true, true)),
            false,
        ),
        (
            "rebuilt: a new one, not Running yet",
            None,
            Some(vmi("new", false, false)),
            false,
        ),
        (
            "rebuilt: a new one Running",
            None,
            Some(vmi("new", true, false)),
            true,
        ),
    ];
    for (row, deleted, v, want) in rows {
        let mut s = State::default();
        let slot = Slot {
            since: at(0),
            vmi_uid: deleted.map(str::to_owned),
        };
        s.restarting.insert(k.clone(), slot);
        assert_eq!(s.finish(&k, v.as_ref()), want, "{row}");
        assert_eq!(s.restarting.is_empty(), want, "{row}");
        assert!(
            !s.finish(&key("a", "other"), v.as_ref()),
            "{row}: not its slot"
        );
    }
}

#[test]
fn the_condition_says_the_place_and_the_budget_and_a_new_leader_reads_it_back() {
    let l = limits(3, 1);
    let mut s = state(&[("a", "r1", 0)], &[]);
    let k = key("a", "m1");
    let wait = admit(&s, &k, at(5), &l);
    let shown = s.shown(&k, Some(&wait), &l).expect("shown");
    assert_eq!((shown.status, shown.reason), ("True", RESTART_PENDING));
    assert!(
        shown.message.contains("1 of 1 in line"),
        "{}",
        shown.message
    );
    assert!(
        shown.message.contains("at most 3 at once"),
        "{}",
        shown.message
    );
    assert!(
        shown.message.contains("namespace a of at most 1"),
        "{}",
        shown.message
    );
    let held = s.shown(&key("a", "r1"), None, &l).expect("shown");
    assert_eq!((held.status, held.reason), ("False", RESTARTING));
    assert_eq!(s.shown(&key("a", "other"), None, &l), None);

    // What a new leader reads back from the conditions.
    s.queue.insert(k.clone(), at(5));
    let cond = |sh: &Shown, since| Condition {
        type_: RESTART_PENDING.to_owned(),
        status: sh.status.to_owned(),
        reason: sh.reason.to_owned(),
        message: sh.message.clone(),
        last_transition_time: Time(at(since)),
        observed_generation: None,
    };
    let (queued, restarting) = ([cond(&shown, 5)], [cond(&held, 0)]);
    let other = [Condition {
        type_: "Ready".to_owned(),
        ..cond(&held, 0)
    }];
    let rebuilt = rebuild([
        (k.clone(), queued.to_vec()),
        (key("a", "r1"), restarting.to_vec()),
        (key("a", "other"), other.to_vec()),
    ]);
    assert_eq!(rebuilt.queue, s.queue);
    assert_eq!(
        rebuilt.restarting.keys().collect::<Vec<_>>(),
        vec![&key("a", "r1")]
    );
    assert_eq!(rebuilt.restarting[&key("a", "r1")].vmi_uid, None);
}
