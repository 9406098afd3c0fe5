use serde_json::json;

use super::*;
use crate::addresses::Pool;
use crate::addresses::held::Held;
use crate::api::network_configuration::{IpRange, Ipam};

fn nets(v: Value) -> Vec<Network> {
    serde_json::from_value(v).expect("networks")
}

fn lan() -> Pool {
    let ipam = Ipam {
        subnet: "10.0.0.0/24".into(),
        gateway: Some("10.0.0.1".into()),
        dns: Vec::new(),
        ranges: vec![IpRange {
            start: "10.0.0.10".into(),
            end: "10.0.0.12".into(),
        }],
    };
    Pool::check(&ipam, &FieldPath::new("spec")).expect("pool")
}

fn lan_live() -> LiveAddresses {
    LiveAddresses::fixed([("ns/lan".to_owned(), lan())])
}

fn hold(live: &LiveAddresses, key: &str, network: &str, ip: &str, origin: Origin) {
    let held = Held {
        network: network.into(),
        address: pack(ip.parse().expect("ip")),
        origin,
    };
    live.with_shared(|s| s.index.set(0, key, vec![held]));
}

fn addresses(n: &[Network]) -> Vec<Vec<String>> {
    n.iter().map(|n| n.addresses.clone()).collect()
}

#[test]
fn interfaces_on_an_ipam_network_keep_theirs_adopt_what_the_vm_reports_or_get_a_free_one() {
    let live = lan_live();
    hold(&live, "ns/other", "ns/lan", "10.0.0.10", Origin::Spec);
    // The stored Machine, as the watch indexed it.
    let stored =
        [("10.0.0.12", Origin::Spec), ("10.0.0.11", Origin::Reported)].map(|(a, origin)| Held {
            network: "ns/lan".into(),
            address: pack(a.parse().expect("ip")),
            origin,
        });
    live.with_shared(|s| s.index.set(0, "ns/web", stored.to_vec()));
    let old = json!({
        "spec": {"networks": [
            {"name": "a", "networkName": "lan", "addresses": ["10.0.0.12/24"]},
            {"name": "b", "networkName": "lan"},
            {"name": "moved", "networkName": "dmz", "addresses": ["10.0.0.99/24"]}
        ]},
        "status": {"interfaces": [
            {"name": "b", "ipAddresses": ["10.0.0.11", "192.168.0.3"]}
        ]}
    });
    let mut n = nets(json!([
        {"name": "a", "networkName": "lan"},
        {"name": "b", "networkName": "lan"},
        {"name": "c", "networkName": "plain"},
        {"name": "d", "networkName": "lan", "addresses": ["10.0.0.200/24"]},
        {"name": "moved", "networkName": "lan"}
    ]));
    let got = fill(&mut n, Some(&old), "ns", "ns/web", &live);
    assert_eq!(
        got,
        Err(FillError::Exhausted(FieldError::invalid(
            &FieldPath::new("spec")
                .child("networks")
                .index(4)
                .child("addresses"),
            Value::Null,
            "NetworkConfiguration lan has no free address left in its ipam ranges",
        ))),
        "10.0.0.10 is held, .11 adopted, .12 kept: the range is full"
    );
    assert_eq!(
        addresses(&n)[..4],
        [
            vec!["10.0.0.12/24".to_owned()],
            vec!["10.0.0.11/24".to_owned()],
            vec![],
            vec!["10.0.0.200/24".to_owned()],
        ]
    );
    // A fresh Machine gets what nobody holds or was just given.
    let live = lan_live();
    let mut one = nets(json!([{"name": "a", "networkName": "lan"}]));
    let mut two = nets(json!([{"name": "a", "networkName": "lan"}]));
    fill(&mut one, None, "ns", "ns/one", &live).expect("one");
    fill(&mut two, None, "ns", "ns/two", &live).expect("two");
    assert_eq!(addresses(&one), [vec!["10.0.0.10/24".to_owned()]]);
    assert_eq!(addresses(&two), [vec!["10.0.0.11/24".to_owned()]]);
    // A network of another namespace with the same name hands out nothing.
    let mut other_ns = nets(json!([{"name": "a", "networkName": "lan"}]));
    fill(&mut other_ns, None, "ns2", "ns2/x", &live).expect("none");
    assert!(other_ns[0].addresses.is_empty());
    // Until the watches listed, nothing can be told.
    let mut n = nets(json!([{"name": "a", "networkName": "lan"}]));
    assert_eq!(
        fill(&mut n, None, "ns", "ns/w", &LiveAddresses::watched(1)),
        Err(FillError::NotLoaded)
    );
}

#[test]
fn addresses_taken_outside_or_reserved_are_refused_naming_the_field_and_holder() {
    let live = lan_live();
    hold(&live, "ns/first", "ns/lan", "10.0.0.50", Origin::Spec);
    hold(&live, "ns/old", "ns/plain", "192.168.0.7", Origin::Reported);
    let given = live
        .allocate("ns/lan", &lan(), "ns/pending")
        .expect("drawn");
    assert_eq!(given, "10.0.0.10/24");
    type Case<'a> = (Value, Option<Value>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (
            json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.0.60/24"]}]),
            None,
            vec![],
        ),
        (
            json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.0.50/24"]}]),
            None,
            vec![(
                "spec.networks[0].addresses[0]",
                "already used on NetworkConfiguration lan by Machine ns/first",
            )],
        ),
        (
            json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.0.10/24"]}]),
            None,
            vec![(
                "spec.networks[0].addresses[0]",
                "already used on NetworkConfiguration lan by Machine ns/pending",
            )],
        ),
        (
            json!([{"name": "a", "networkName": "plain", "addresses": ["192.168.0.7/24"]}]),
            None,
            vec![(
                "spec.networks[0].addresses[0]",
                "already used on NetworkConfiguration plain by Machine ns/old (its VM reports it in status)",
            )],
        ),
        (
            json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.1.5/24"]}]),
            None,
            vec![(
                "spec.networks[0].addresses[0]",
                "is outside the subnet 10.0.0.0/24 of NetworkConfiguration lan",
            )],
        ),
        (
            json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.0.5/16"]}]),
            None,
            vec![(
                "spec.networks[0].addresses[0]",
                "must have the subnet's prefix /24",
            )],
        ),
        (
            json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.0.1/24"]}]),
            None,
            vec![(
                "spec.networks[0].addresses[0]",
                "is the subnet's network, broadcast or gateway address (10.0.0.0/24)",
            )],
        ),
        (
            json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.0.60/24"]},
                {"name": "b", "networkName": "lan", "addresses": ["10.0.0.60/24"]}]),
            None,
            vec![("spec.networks[1].addresses[0]", "")],
        ),
        // Stored before: an address the Machine had there is never checked again.
        (
            json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.0.50/24"]}]),
            Some(
                json!({"spec": {"networks": [{"name": "a", "networkName": "lan", "addresses": ["10.0.0.50/24"]}]}}),
            ),
            vec![],
        ),
    ];
    for (networks, old, want) in cases {
        let n = nets(networks.clone());
        let got = errors(&n, old.as_ref(), "ns", "ns/me", &live).expect("loaded");
        let got: Vec<(String, String)> = got.into_iter().map(|e| (e.field, e.detail)).collect();
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(f, d)| (f.to_owned(), d.to_owned()))
            .collect();
        assert_eq!(got, want, "{networks}");
    }
    // The Machine the address was handed to passes with it.
    let n = nets(json!([{"name": "a", "networkName": "lan", "addresses": ["10.0.0.10/24"]}]));
    assert_eq!(errors(&n, None, "ns", "ns/pending", &live), Ok(Vec::new()));
}

#[test]
fn network_data_that_gives_the_interface_another_address_is_refused() {
    let n = nets(
        json!([{"name": "a", "networkName": "lan", "macAddress": "02:00:00:00:00:0a",
                         "addresses": ["10.0.0.5/24"]}]),
    );
    let ci = |data: &str| CloudInit {
        network_data: Some(data.to_owned()),
        ..CloudInit::default()
    };
    let bad = ci(
        "version: 2\nethernets:\n  eth0:\n    match: {macaddress: '02:00:00:00:00:0a'}\n    addresses: [10.0.0.7/24]\n",
    );
    let errs = network_data_errors(&n, Some(&bad));
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].field, "spec.cloudInit.networkData");
    assert!(
        errs[0]
            .detail
            .contains("spec.networks[0].addresses is 10.0.0.5/24"),
        "{}",
        errs[0].detail
    );
    let good = ci(
        "version: 2\nethernets:\n  eth0:\n    match: {macaddress: '02:00:00:00:00:0a'}\n    addresses: [10.0.0.5/24]\n",
    );
    assert!(network_data_errors(&n, Some(&good)).is_empty());
    assert!(network_data_errors(&n, None).is_empty());
}
