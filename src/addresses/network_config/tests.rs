use super::*;
use crate::api::network_configuration::Ipam;
use crate::machine::FieldPath;

fn pool(subnet: &str, gateway: Option<&str>, dns: &[&str]) -> Pool {
    let ipam = Ipam {
        subnet: subnet.into(),
        gateway: gateway.map(Into::into),
        dns: dns.iter().map(|d| (*d).into()).collect(),
        ranges: Vec::new(),
    };
    Pool::check(&ipam, &FieldPath::new("spec")).expect("pool")
}

fn yaml(s: Option<String>) -> Option<Value> {
    s.map(|s| serde_yaml::from_str(&s).expect("yaml"))
}

#[test]
fn addresses_gateway_and_dns_by_mac() {
    let lan = pool("10.0.0.0/24", Some("10.0.0.1"), &["10.0.0.2", "10.0.0.3"]);
    let lan2 = pool("10.0.1.0/24", Some("10.0.1.1"), &[]);
    let v6 = pool("fd00::/64", Some("fd00::1"), &[]);
    let a = ["10.0.0.5/24".to_owned()];
    let b = ["10.0.1.5/24".to_owned()];
    let c = ["fd00::5/64".to_owned()];
    let static_only = ["192.168.9.9/24".to_owned()];
    let cases: Vec<(Vec<Nic>, Option<Value>)> = vec![
        // Nothing static: no network-config, the guest keeps its default.
        (
            vec![Nic {
                mac: Some("02:00:00:00:00:01"),
                addresses: &[],
                pool: None,
            }],
            None,
        ),
        // No MAC to match by: nothing to say.
        (
            vec![Nic {
                mac: None,
                addresses: &a,
                pool: Some(&lan),
            }],
            None,
        ),
        (
            vec![
                Nic {
                    mac: Some("02:00:00:00:00:0A"),
                    addresses: &a,
                    pool: Some(&lan),
                },
                // A second IPv4 gateway would be a second default route: left out.
                Nic {
                    mac: Some("02:00:00:00:00:0b"),
                    addresses: &b,
                    pool: Some(&lan2),
                },
                Nic {
                    mac: Some("02:00:00:00:00:0c"),
                    addresses: &c,
                    pool: Some(&v6),
                },
                Nic {
                    mac: Some("02:00:00:00:00:0d"),
                    addresses: &[],
                    pool: None,
                },
                Nic {
                    mac: Some("02:00:00:00:00:0e"),
                    addresses: &static_only,
                    pool: None,
                },
            ],
            Some(json!({"version": 2, "ethernets": {
                "nic0": {"match": {"macaddress": "02:00:00:00:00:0a"}, "addresses": ["10.0.0.5/24"],
                         "routes": [{"to": "0.0.0.0/0", "via": "10.0.0.1"}],
                         "nameservers": {"addresses": ["10.0.0.2", "10.0.0.3"]}},
                "nic1": {"match": {"macaddress": "02:00:00:00:00:0b"}, "addresses": ["10.0.1.5/24"]},
                "nic2": {"match": {"macaddress": "02:00:00:00:00:0c"}, "addresses": ["fd00::5/64"],
                         "routes": [{"to": "::/0", "via": "fd00::1"}]},
                "nic3": {"match": {"macaddress": "02:00:00:00:00:0d"}, "dhcp4": true},
                "nic4": {"match": {"macaddress": "02:00:00:00:00:0e"}, "addresses": ["192.168.9.9/24"]},
            }})),
        ),
    ];
    for (nics, want) in cases {
        assert_eq!(yaml(render(&nics)), want);
    }
}
