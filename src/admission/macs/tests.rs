use serde_json::json;

use super::*;
use crate::macs::held::Held;
use crate::macs::index::mac_number;

fn nets(v: serde_json::Value) -> Vec<Network> {
    serde_json::from_value(v).expect("networks")
}

fn used_by(macs: &LiveMacs, key: &str, mac: &str) {
    let n = mac_number(mac).expect("mac");
    macs.with_index(|i| i.set(0, key.to_owned(), vec![Held::spec(n)]));
}

/// `key`'s VM reports `mac` for an interface whose spec sets none (a pre-rule Machine).
fn reported_by(macs: &LiveMacs, key: &str, mac: &str) {
    let n = mac_number(mac).expect("mac");
    macs.with_index(|i| i.set(0, key.to_owned(), vec![Held::reported(n)]));
}

#[test]
fn interfaces_keep_their_stored_address_and_new_ones_get_a_free_one() {
    let macs = LiveMacs::seeded(7);
    let old = json!({
        "spec": {"networks": [
            {"name": "eth0", "networkName": "a", "macAddress": "02:00:00:00:00:01"},
            {"name": "eth1", "networkName": "b"}
        ]},
        "status": {"interfaces": [
            {"name": "eth1", "macAddress": "52:54:00:00:00:09"},
            {"name": "eth2", "macAddress": "52:54:00:00:00:0a"}
        ]}
    });
    used_by(&macs, "ns/web", "02:00:00:00:00:01");
    let mut n = nets(json!([
        {"name": "eth0", "networkName": "a"},
        {"name": "eth1", "networkName": "b"},
        {"name": "eth2", "networkName": "c"},
        {"name": "eth3", "networkName": "d", "macAddress": "52:54:00:00:00:33"}
    ]));
    let warnings = fill(&mut n, Some(&old), "ns/web", &macs).expect("filled");
    assert!(warnings.is_empty(), "{warnings:?}");
    let got: Vec<&str> = n.iter().filter_map(|n| n.mac_address.as_deref()).collect();
    assert_eq!(&got[..2], ["02:00:00:00:00:01", "52:54:00:00:00:09"]);
    // eth2 was no spec network: what its VM reports was never held (nor indexed).
    assert_ne!(got[2], "52:54:00:00:00:0a");
    assert_eq!(got[3], "52:54:00:00:00:33", "a user's address is theirs");
    let fresh = mac_number(got[2]).expect("a MAC");
    assert_eq!(fresh >> 40 & 0x03, 0x02, "local unicast: {}", got[2]);
    // What the VMI reported is not kept when another Machine's spec holds it: said.
    used_by(&macs, "ns/other", "52:54:00:00:00:09");
    let mut n = nets(json!([{"name": "eth1", "networkName": "b"}]));
    let warnings = fill(&mut n, Some(&old), "ns/web", &macs).expect("filled");
    let fresh = n[0].mac_address.clone().expect("given one");
    assert_ne!(fresh, "52:54:00:00:00:09");
    assert_eq!(
        warnings,
        [format!(
            r#"spec.networks["eth1"].macAddress: 52:54:00:00:00:09, which its VM reports, is held by Machine ns/other; given {fresh} instead (the guest gets it at its next restart)"#
        )]
    );
}

#[test]
fn an_interface_keeps_what_it_holds_unless_another_machine_holds_it() {
    let cases = [
        (false, None, Choice::Draw),
        (false, Some("ns/other"), Choice::Draw),
        (true, None, Choice::Keep),
        (true, Some("ns/web"), Choice::Keep),
        (true, Some("ns/other"), Choice::Taken("ns/other")),
    ];
    for (stored, holder, want) in cases {
        assert_eq!(
            choose(stored, holder, "ns/web"),
            want,
            "{stored} {holder:?}"
        );
    }
}

#[test]
fn a_pre_rule_machine_gets_its_reported_address_written_into_its_spec() {
    let macs = LiveMacs::seeded(3);
    // Spelled as KubeVirt reports it; the index learnt it from the watch.
    let old = json!({
        "spec": {"networks": [{"name": "eth0", "networkName": "a"}]},
        "status": {"interfaces": [{"name": "eth0", "macAddress": "52:54:00:0a:0b:0c"}]}
    });
    reported_by(&macs, "ns/old", "52:54:00:0a:0b:0c");
    let mut n = nets(json!([{"name": "eth0", "networkName": "a"}]));
    let warnings = fill(&mut n, Some(&old), "ns/old", &macs).expect("filled");
    assert_eq!(
        (n[0].mac_address.as_deref(), warnings.len()),
        (Some("52:54:00:0a:0b:0c"), 0)
    );
    // A spec value, even one the update drops, wins over what the VM reports.
    let old = json!({
        "spec": {"networks": [{"name": "eth0", "networkName": "a", "macAddress": "02:00:00:00:00:07"}]},
        "status": {"interfaces": [{"name": "eth0", "macAddress": "52:54:00:0a:0b:0c"}]}
    });
    let mut n = nets(json!([{"name": "eth0", "networkName": "a"}]));
    fill(&mut n, Some(&old), "ns/old", &macs).expect("filled");
    assert_eq!(n[0].mac_address.as_deref(), Some("02:00:00:00:00:07"));
}

#[test]
fn a_reported_address_is_refused_to_others_naming_its_machine() {
    let macs = LiveMacs::seeded(1);
    reported_by(&macs, "team-a/old", "52:54:00:0a:0b:0c");
    let n = nets(json!([{"name": "eth0", "networkName": "a", "macAddress": "52:54:00:0A:0B:0C"}]));
    let errors = duplicate_errors(&n, None, "team-b/new", &macs).expect("loaded");
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            r#"spec.networks[0].macAddress: Duplicate value: "52:54:00:0A:0B:0C": already used by Machine team-a/old (its VM reports it in status)"#
        ]
    );
    // The holder itself may write it into its spec (the backfill).
    assert!(
        duplicate_errors(&n, None, "team-a/old", &macs)
            .expect("loaded")
            .is_empty()
    );
}

#[test]
fn a_new_address_another_machine_uses_is_refused_naming_it() {
    let macs = LiveMacs::seeded(1);
    used_by(&macs, "team-a/db", "52:54:00:12:34:56");
    let n = nets(json!([
        {"name": "eth0", "networkName": "a", "macAddress": "52-54-00-12-34-56"},
        {"name": "eth1", "networkName": "a", "macAddress": "52:54:00:12:34:57"}
    ]));
    let errors = duplicate_errors(&n, None, "team-b/web", &macs).expect("loaded");
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            r#"spec.networks[0].macAddress: Duplicate value: "52-54-00-12-34-56": already used by Machine team-a/db"#
        ]
    );
    // Its own address, or one it already had when stored, is never refused.
    assert!(
        duplicate_errors(&n, None, "team-a/db", &macs)
            .expect("loaded")
            .is_empty()
    );
    let old = json!({"spec": {"networks": [{"name": "eth0", "macAddress": "52:54:00:12:34:56"}]}});
    assert!(
        duplicate_errors(&n, Some(&old), "team-b/web", &macs)
            .expect("loaded")
            .is_empty()
    );
}

#[test]
fn an_index_still_listing_refuses_only_requests_with_new_addresses() {
    let macs = LiveMacs::watched(1);
    let none = nets(json!([{"name": "eth0", "networkName": "a"}]));
    assert_eq!(duplicate_errors(&none, None, "ns/a", &macs), Ok(Vec::new()));
    let set =
        nets(json!([{"name": "eth0", "networkName": "a", "macAddress": "52:54:00:00:00:01"}]));
    assert_eq!(
        duplicate_errors(&set, None, "ns/a", &macs),
        Err(MACS_NOT_LOADED)
    );
}
