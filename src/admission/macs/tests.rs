use serde_json::json;

use super::*;
use crate::macs::index::mac_number;

fn nets(v: serde_json::Value) -> Vec<Network> {
    serde_json::from_value(v).expect("networks")
}

fn used_by(macs: &LiveMacs, key: &str, mac: &str) {
    let n = mac_number(mac).expect("mac");
    macs.with_index(|i| i.set(0, key.to_owned(), vec![n]));
}

#[test]
fn interfaces_keep_their_stored_address_and_new_ones_get_a_free_one() {
    let macs = LiveMacs::seeded(7);
    let old = json!({
        "spec": {"networks": [{"name": "eth0", "networkName": "a", "macAddress": "02:00:00:00:00:01"}]},
        "status": {"interfaces": [{"name": "eth1", "macAddress": "52:54:00:00:00:09"}]}
    });
    used_by(&macs, "ns/web", "02:00:00:00:00:01");
    let mut n = nets(json!([
        {"name": "eth0", "networkName": "a"},
        {"name": "eth1", "networkName": "b"},
        {"name": "eth2", "networkName": "c"},
        {"name": "eth3", "networkName": "d", "macAddress": "52:54:00:00:00:33"}
    ]));
    fill(&mut n, Some(&old), "ns/web", &macs).expect("filled");
    let got: Vec<&str> = n.iter().filter_map(|n| n.mac_address.as_deref()).collect();
    assert_eq!(&got[..2], ["02:00:00:00:00:01", "52:54:00:00:00:09"]);
    assert_eq!(got[3], "52:54:00:00:00:33", "a user's address is theirs");
    let fresh = mac_number(got[2]).expect("a MAC");
    assert_eq!(fresh >> 40 & 0x03, 0x02, "local unicast: {}", got[2]);
    // What the VMI reported is not kept when another Machine holds it now.
    used_by(&macs, "ns/other", "52:54:00:00:00:09");
    let mut n = nets(json!([{"name": "eth1", "networkName": "b"}]));
    fill(&mut n, Some(&old), "ns/web", &macs).expect("filled");
    assert_ne!(n[0].mac_address.as_deref(), Some("52:54:00:00:00:09"));
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
