use super::*;

fn key(name: &str) -> MachineKey {
    format!("ns/{name}")
}

/// Addresses a spec sets.
fn spec(macs: &[u64]) -> Vec<Held> {
    macs.iter().copied().map(Held::spec).collect()
}

#[test]
fn addresses_are_parsed_and_printed_like_kubevirt() {
    let mac = mac_number("52-54-00-AB-cd-01").expect("mac");
    assert_eq!(format_mac(mac), "52:54:00:ab:cd:01");
    assert_eq!(mac_number("52:54:00:ab:cd:01"), Some(mac));
    assert_eq!(mac_number("52:54:00:ab:cd"), None);
}

#[test]
fn allocated_addresses_are_local_unicast_and_never_repeat() {
    let mut index = MacIndex::default();
    // A random source stuck on one value: the second draw must not reuse the first.
    let mut stuck = || 0xdead_beef_cafe_u64;
    let first = index.allocate(&mut stuck).expect("first");
    assert_eq!(
        first >> 40 & 0x03,
        0x02,
        "local, unicast: {}",
        format_mac(first)
    );
    assert_eq!(
        index.allocate(&mut stuck),
        None,
        "only ever the same address"
    );
    let mut counter = 0u64;
    let mut next = || {
        counter += 1;
        counter
    };
    let a = index.allocate(&mut next).expect("a");
    let b = index.allocate(&mut next).expect("b");
    assert_ne!(a, b);
    assert!(format_mac(a).starts_with("02:00:00:00:00:"));
}

#[test]
fn a_used_address_is_skipped_and_its_machine_named() {
    let mut index = MacIndex::new(1);
    index.begin_list(0);
    index.listed(0, key("web"), spec(&[local_unicast(1)]));
    assert!(!index.loaded());
    index.end_list(0);
    assert!(index.loaded());
    assert_eq!(index.owner(local_unicast(1)), Some("ns/web"));
    let mut draws = [1u64, 1, 2].into_iter();
    assert_eq!(
        index.allocate(|| draws.next().unwrap_or(9)),
        Some(local_unicast(2))
    );
}

#[test]
fn changes_and_relists_keep_the_index_exact() {
    let mut index = MacIndex::new(1);
    index.set(0, key("a"), spec(&[10, 11]));
    index.set(0, key("b"), spec(&[12]));
    // A changed Machine gives up the address it dropped.
    index.set(0, key("a"), spec(&[11]));
    assert_eq!(index.owner(10), None);
    assert_eq!(index.owner(11), Some("ns/a"));
    // One stored with another's address (past the webhook): the first keeps it, and deleting
    // the second does not free it.
    index.set(0, key("c"), spec(&[12]));
    index.remove("ns/c");
    assert_eq!(index.owner(12), Some("ns/b"));
    index.remove("ns/b");
    assert_eq!(index.owner(12), None);
    // A relist replaces everything: "a" went while the watch was down.
    index.begin_list(0);
    index.listed(0, key("d"), spec(&[13]));
    assert_eq!(
        index.owner(11),
        Some("ns/a"),
        "in force until the list ends"
    );
    index.end_list(0);
    assert_eq!((index.owner(11), index.owner(13)), (None, Some("ns/d")));
}

#[test]
fn each_watch_relists_its_own_machines_and_all_must_list_once() {
    let mut index = MacIndex::new(2);
    index.begin_list(0);
    index.listed(0, "a/x".into(), spec(&[1]));
    index.end_list(0);
    assert!(!index.loaded(), "namespace b has not listed");
    index.begin_list(1);
    index.listed(1, "b/y".into(), spec(&[2]));
    index.end_list(1);
    assert!(index.loaded());
    // b relists without y: a's Machines stay.
    index.begin_list(1);
    index.end_list(1);
    assert_eq!((index.owner(1), index.owner(2)), (Some("a/x"), None));
}

#[test]
fn a_reservation_ends_when_a_machine_shows_the_address() {
    let mut index = MacIndex::default();
    let mac = index.allocate(|| 5).expect("mac");
    assert_eq!(index.allocate(|| 5), None, "reserved");
    index.set(0, key("new"), spec(&[mac]));
    index.remove("ns/new");
    assert!(
        index.allocate(|| 5).is_some(),
        "free again once its Machine went"
    );
}

/// Who holds the address in the end, and how.
type Holder = Option<(&'static str, Origin)>;

/// A Machine that holds an address, or one deleted.
enum Ev {
    Set(&'static str, Held),
    Remove(&'static str),
}

#[test]
fn who_holds_an_address_many_machines_hold() {
    use Ev::{Remove, Set};
    const X: u64 = 0x0200_0000_00aa;
    let (s, r) = (Held::spec(X), Held::reported(X));
    let cases: [(&str, Vec<Ev>, Holder); 11] = [
        (
            "reported only",
            vec![Set("p", r)],
            Some(("ns/p", Origin::Reported)),
        ),
        (
            "a spec takes it from a VM that only reports it",
            vec![Set("p", r), Set("s", s)],
            Some(("ns/s", Origin::Spec)),
        ),
        (
            "a spec keeps it from a VM that reports it later",
            vec![Set("s", s), Set("p", r)],
            Some(("ns/s", Origin::Spec)),
        ),
        (
            "two reported: first come",
            vec![Set("p", r), Set("q", r)],
            Some(("ns/p", Origin::Reported)),
        ),
        (
            "two specs: first come",
            vec![Set("a", s), Set("b", s)],
            Some(("ns/a", Origin::Spec)),
        ),
        (
            "the holder's next event changes nothing",
            vec![Set("a", s), Set("b", s), Set("a", s), Set("b", s)],
            Some(("ns/a", Origin::Spec)),
        ),
        (
            "the backfill: the reported address written into its spec stays its own",
            vec![Set("p", r), Set("q", r), Set("p", s)],
            Some(("ns/p", Origin::Spec)),
        ),
        (
            "the spec holder gone, the reported one holds it again",
            vec![Set("p", r), Set("s", s), Remove("s")],
            Some(("ns/p", Origin::Reported)),
        ),
        (
            "the holder gone, a waiting spec comes before an earlier reported",
            vec![Set("a", s), Set("p", r), Set("b", s), Remove("a")],
            Some(("ns/b", Origin::Spec)),
        ),
        (
            "a holder whose spec no longer sets it gives way to a waiting spec",
            vec![Set("a", s), Set("b", s), Set("a", r)],
            Some(("ns/b", Origin::Spec)),
        ),
        (
            "every holder gone",
            vec![Set("p", r), Set("s", s), Remove("p"), Remove("s")],
            None,
        ),
    ];
    for (what, events, want) in cases {
        let mut index = MacIndex::new(1);
        for e in events {
            match e {
                Set(name, held) => index.set(0, key(name), vec![held]),
                Remove(name) => index.remove(&key(name)),
            }
        }
        assert_eq!(index.holder(X), want, "{what}");
        assert_eq!(index.owner(X), want.map(|(k, _)| k), "{what}");
    }
}

#[test]
fn a_relist_gives_a_contested_address_to_the_spec_whatever_the_order() {
    const X: u64 = 0x0200_0000_00bb;
    for names in [["p", "s"], ["s", "p"]] {
        let mut index = MacIndex::new(1);
        index.begin_list(0);
        for name in names {
            let held = if name == "s" {
                Held::spec(X)
            } else {
                Held::reported(X)
            };
            index.listed(0, key(name), vec![held]);
        }
        index.end_list(0);
        assert_eq!(index.holder(X), Some(("ns/s", Origin::Spec)), "{names:?}");
    }
}

#[test]
fn a_reported_address_is_never_drawn() {
    let mut index = MacIndex::new(1);
    let taken = local_unicast(3);
    index.set(0, key("pre-rule"), vec![Held::reported(taken)]);
    let mut draws = [3u64, 4].into_iter();
    assert_eq!(
        index.allocate(|| draws.next().unwrap_or(9)),
        Some(local_unicast(4))
    );
    // Its Machine gone, nothing is left behind.
    index.remove("ns/pre-rule");
    assert!(index.contested.is_empty() && index.by_mac.is_empty());
}
