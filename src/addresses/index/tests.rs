use std::time::{Duration, Instant};

use super::*;
use crate::addresses::ip::{pack, unpack};
use crate::api::network_configuration::{IpRange, Ipam};
use crate::machine::FieldPath;

const LAN: &str = "team-a/lan";

fn ip(s: &str) -> u128 {
    pack(s.parse().expect("ip"))
}

fn pool(subnet: &str, gateway: Option<&str>, ranges: &[(&str, &str)]) -> Pool {
    let ipam = Ipam {
        subnet: subnet.into(),
        gateway: gateway.map(Into::into),
        dns: Vec::new(),
        ranges: (ranges.iter())
            .map(|(s, e)| IpRange {
                start: (*s).into(),
                end: (*e).into(),
            })
            .collect(),
    };
    Pool::check(&ipam, &FieldPath::new("spec")).expect("pool")
}

fn spec(network: &str, a: &str) -> Held {
    Held {
        network: network.into(),
        address: ip(a),
        origin: Origin::Spec,
    }
}

fn draw(i: &mut AddressIndex, p: &Pool, key: &str, now: Instant) -> Option<String> {
    i.allocate(LAN, p, key, now).map(|a| unpack(a).to_string())
}

#[test]
fn draws_skip_held_reserved_and_the_gateway_and_go_round() {
    let now = Instant::now();
    let p = pool(
        "10.0.0.0/24",
        Some("10.0.0.11"),
        &[("10.0.0.10", "10.0.0.14"), ("10.0.0.20", "10.0.0.21")],
    );
    let mut i = AddressIndex::new(0);
    i.set(
        0,
        "team-a/held",
        vec![spec(LAN, "10.0.0.10"), spec(LAN, "10.0.0.12")],
    );
    // Another network's addresses take nothing here.
    i.set(0, "team-a/other", vec![spec("team-a/dmz", "10.0.0.13")]);
    let got: Vec<Option<String>> = (0..5)
        .map(|n| draw(&mut i, &p, &format!("team-a/m{n}"), now))
        .collect();
    let want = ["10.0.0.13", "10.0.0.14", "10.0.0.20", "10.0.0.21"];
    assert_eq!(got[..4], want.map(|s| Some(s.to_owned())));
    assert_eq!(
        got[4], None,
        "every address is held, reserved or the gateway"
    );
    assert_eq!(i.reserved_for(LAN, ip("10.0.0.13"), now), Some("team-a/m0"));
    // m0 shows its address: the reservation turns into a holding.
    i.set(0, "team-a/m0", vec![spec(LAN, "10.0.0.13")]);
    assert_eq!(i.reserved_for(LAN, ip("10.0.0.13"), now), None);
    assert_eq!(
        i.holder(LAN, ip("10.0.0.13")),
        Some(("team-a/m0", Origin::Spec))
    );
    // Reservations never shown expire; the walk goes round from the last draw.
    i.remove("team-a/held");
    let later = now + RESERVATION + Duration::from_secs(1);
    assert_eq!(
        draw(&mut i, &p, "team-a/n", later).as_deref(),
        Some("10.0.0.10")
    );
    assert_eq!(
        draw(&mut i, &p, "team-a/n2", later).as_deref(),
        Some("10.0.0.12")
    );
    assert_eq!(
        draw(&mut i, &p, "team-a/n3", later).as_deref(),
        Some("10.0.0.14")
    );
}

#[test]
fn two_draws_at_once_never_get_the_same_address() {
    let now = Instant::now();
    let p = pool("10.0.0.0/24", None, &[("10.0.0.10", "10.0.0.11")]);
    let mut i = AddressIndex::new(0);
    let a = draw(&mut i, &p, "team-a/a", now);
    let b = draw(&mut i, &p, "team-a/b", now);
    assert_ne!(a, b);
    assert_eq!(draw(&mut i, &p, "team-a/c", now), None);
}

#[test]
fn a_relist_rebuilds_the_index_and_a_spec_holder_comes_before_a_reported_one() {
    let mut i = AddressIndex::new(1);
    assert!(!i.loaded());
    i.begin_list(0);
    let reported = Held {
        origin: Origin::Reported,
        ..spec(LAN, "10.0.0.5")
    };
    i.listed(0, "team-a/old", vec![reported]);
    i.listed(0, "team-a/none", vec![]);
    assert_eq!(
        i.holder(LAN, ip("10.0.0.5")),
        None,
        "nothing in force before the list ends"
    );
    i.end_list(0);
    assert!(i.loaded());
    assert_eq!(
        i.holder(LAN, ip("10.0.0.5")),
        Some(("team-a/old", Origin::Reported))
    );
    i.set(0, "team-a/new", vec![spec(LAN, "10.0.0.5")]);
    assert_eq!(
        i.holder(LAN, ip("10.0.0.5")),
        Some(("team-a/new", Origin::Spec))
    );
    // A relist without the new Machine (deleted while the watch was down) lets it go.
    i.begin_list(0);
    i.listed(0, "team-a/old", vec![spec(LAN, "10.0.0.6")]);
    i.end_list(0);
    assert_eq!(i.holder(LAN, ip("10.0.0.5")), None);
    assert_eq!(
        i.holder(LAN, ip("10.0.0.6")),
        Some(("team-a/old", Origin::Spec))
    );
    assert!(
        i.by_machine.len() == 1,
        "Machines without addresses are not kept"
    );
}

#[test]
fn a_range_of_two_to_the_24_is_never_walked_whole() {
    let now = Instant::now();
    let p = pool("10.0.0.0/8", None, &[]);
    let mut i = AddressIndex::new(0);
    // A run of held addresses at the start: the walk skips it address by address through the
    // map, bounded by what is held, not by the 16 million of the range.
    let run: Vec<Held> = (1..=2000u32)
        .map(|n| spec(LAN, &std::net::Ipv4Addr::from(0x0a00_0000 + n).to_string()))
        .collect();
    i.set(0, "team-a/big", run);
    let started = std::time::Instant::now();
    for n in 0..1000 {
        assert!(draw(&mut i, &p, &format!("team-a/m{n}"), now).is_some());
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        draw(&mut i, &p, "team-a/x", now).as_deref(),
        Some("10.0.11.185")
    );
}
