use super::*;

fn spec(bridge: Option<&str>, vlan: Option<i64>) -> NetworkConfigurationSpec {
    NetworkConfigurationSpec {
        bridge: bridge.map(str::to_owned),
        vlan,
        ipam: None,
    }
}

fn policy(bridges: &[&str], vlans: &str) -> NetworkPolicy {
    NetworkPolicy::new(
        bridges.iter().map(|b| (*b).to_owned()),
        Vlans::parse(vlans).expect("vlans"),
    )
}

fn messages(p: &NetworkPolicy, s: &NetworkConfigurationSpec) -> Vec<String> {
    p.check(s).iter().map(ToString::to_string).collect()
}

#[test]
fn bridge_names_follow_linux_interface_rules() {
    let long16 = "b".repeat(16);
    let cases: &[(&str, bool)] = &[
        ("br0", true),
        ("br-prod.100", true),
        (&long16[..15], true),
        ("", false),
        (&long16, false),
        (".", false),
        ("..", false),
        ("...", true),
        ("br/0", false),
        ("br:0", false),
        ("br 0", false),
        ("br\t0", false),
        ("ø12345", true),
        // 16 bytes in 8 characters: Linux counts bytes.
        ("øøøøøøøø", false),
    ];
    for (name, ok) in cases {
        assert_eq!(interface_name_problem(name).is_none(), *ok, "{name:?}");
    }
}

/// Before issue 25, with no list every bridge (`cni0`, the node's management bridge) and every
/// VLAN was accepted.
#[test]
fn unset_allows_no_bridge_and_untagged_traffic_only() {
    let p = NetworkPolicy::default();
    assert_eq!(
        messages(&p, &spec(Some("cni0"), None)),
        [
            r#"spec.bridge: Unsupported value: "cni0": the operator's --allowed-bridges (ALLOWED_BRIDGES) allows no bridge (unset)"#
        ]
    );
    let p = policy(&["br0"], DEFAULT_VLANS);
    assert!(p.check(&spec(Some("br0"), None)).is_empty());
    assert!(p.check(&spec(Some("br0"), Some(0))).is_empty());
    assert_eq!(
        messages(&p, &spec(Some("br0"), Some(7))),
        [
            r#"spec.vlan: Unsupported value: 7: the operator's --allowed-vlans (ALLOWED_VLANS) allows 0 (0: untagged)"#
        ]
    );
}

#[test]
fn only_listed_bridges_and_vlans_pass() {
    let p = policy(&["br1", "br0"], "100-199,300");
    let cases = [
        (Some("br0"), Some(100), 0),
        (Some("br1"), Some(199), 0),
        (Some("br0"), Some(300), 0),
        (Some("br0"), Some(200), 1),
        (Some("br0"), None, 1),
        (Some("br-mgmt"), Some(150), 1),
        (Some("br-mgmt"), Some(4095), 2),
        (None, Some(100), 1),
        (Some("br/0"), Some(100), 1),
    ];
    for (bridge, vlan, errors) in cases {
        assert_eq!(
            p.check(&spec(bridge, vlan)).len(),
            errors,
            "{bridge:?} {vlan:?}"
        );
    }
    assert_eq!(
        messages(&p, &spec(Some("br-mgmt"), Some(200))),
        [
            r#"spec.bridge: Unsupported value: "br-mgmt": the operator's --allowed-bridges (ALLOWED_BRIDGES) allows br0, br1"#,
            r#"spec.vlan: Unsupported value: 200: the operator's --allowed-vlans (ALLOWED_VLANS) allows 100-199,300 (0: untagged)"#,
        ]
    );
}

#[test]
fn vlan_settings_parse_or_say_why() {
    assert_eq!(
        Vlans::parse(" 0, 100-199 ,300")
            .expect("parses")
            .to_string(),
        "0,100-199,300"
    );
    for bad in ["", ",", "4095", "-1", "200-100", "a", "1-2-3", "100-"] {
        assert!(Vlans::parse(bad).is_err(), "{bad:?}");
    }
}
