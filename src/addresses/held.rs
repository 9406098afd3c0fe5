//! Which addresses a Machine holds on each network (pure): those its spec sets, else those its
//! VM reports on that interface (a Machine from before addresses were written into specs), as
//! the MAC rule does. Interfaces only in status (the pod network) hold none.

use std::net::IpAddr;

use super::ip::{address, cidr, pack};

/// Where a held address comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `spec.networks[].addresses`: admitted against the index.
    Spec,
    /// `status.interfaces[].ipAddresses` of an interface whose spec sets none.
    Reported,
}

/// One address held on one NetworkConfiguration (`namespace/name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub network: String,
    pub address: u128,
    pub origin: Origin,
}

/// The address of a CIDR from a spec, if it is one.
pub fn spec_address(s: &str) -> Option<IpAddr> {
    cidr(s).map(|n| n.addr())
}

/// Every address a Machine in `namespace` holds: per spec network (its interface name, its
/// NetworkConfiguration, its `addresses`), with `reported` giving what the VM reports for an
/// interface name. Values that are no address hold nothing.
pub fn held_by<'a>(
    namespace: &str,
    networks: impl IntoIterator<Item = (&'a str, &'a str, &'a [String])>,
    reported: impl Fn(&str) -> &'a [String],
) -> Vec<Held> {
    let mut out = Vec::new();
    for (name, network, addresses) in networks {
        let network = format!("{namespace}/{network}");
        let (list, origin) = if addresses.is_empty() {
            (reported(name), Origin::Reported)
        } else {
            (addresses, Origin::Spec)
        };
        // A spec value is a CIDR, a reported one a bare address.
        let parse = |s: &String| match origin {
            Origin::Spec => spec_address(s),
            Origin::Reported => address(s),
        };
        let usable = |ip: &IpAddr| origin == Origin::Spec || !link_local(ip);
        out.extend(list.iter().filter_map(parse).filter(usable).map(|ip| Held {
            network: network.clone(),
            address: pack(ip),
            origin,
        }));
    }
    out
}

/// A guest's link-local addresses are its own business: never held.
fn link_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => a.is_unicast_link_local(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> u128 {
        pack(s.parse().expect("ip"))
    }

    #[test]
    fn spec_addresses_else_what_the_vm_reports_on_that_interface() {
        let status: [(&str, Vec<String>); 2] = [
            ("eth0", vec!["10.0.0.99".into()]),
            (
                "eth1",
                vec!["10.1.0.7".into(), "fe80::1".into(), "junk".into()],
            ),
        ];
        let reported = |name: &str| {
            status
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, a)| a.as_slice())
                .unwrap_or(&[])
        };
        let spec = ["10.0.0.5/24".to_owned(), "bad".to_owned()];
        let got = held_by(
            "team-a",
            [
                ("eth0", "lan", &spec[..]),
                ("eth1", "dmz", &[][..]),
                ("eth2", "x", &[][..]),
            ],
            reported,
        );
        let h = |n: &str, a: &str, origin| Held {
            network: n.into(),
            address: ip(a),
            origin,
        };
        assert_eq!(
            got,
            [
                h("team-a/lan", "10.0.0.5", Origin::Spec),
                h("team-a/dmz", "10.1.0.7", Origin::Reported),
            ]
        );
    }
}
