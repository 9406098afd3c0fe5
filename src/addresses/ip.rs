//! An address as the index keeps it: one `u128`, IPv4 in its IPv4-mapped IPv6 form
//! (`::ffff:a.b.c.d`), so one map holds both families and an address costs 16 bytes.

use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;

pub fn pack(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

pub fn unpack(n: u128) -> IpAddr {
    let v6 = Ipv6Addr::from(n);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// `10.0.0.5/24` (the address keeps its host bits); `None` for anything else.
pub fn cidr(s: &str) -> Option<IpNet> {
    s.parse().ok()
}

/// A bare address (`10.0.0.5`), as the VMI reports them.
pub fn address(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

/// The first and last address of `net`, packed.
pub fn bounds(net: &IpNet) -> (u128, u128) {
    (pack(net.network()), pack(net.broadcast()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_pack_and_come_back() {
        for s in ["10.0.0.5", "0.0.0.0", "255.255.255.255", "fd00::5", "::1"] {
            let ip: IpAddr = s.parse().expect("ip");
            assert_eq!(unpack(pack(ip)), ip, "{s}");
        }
        assert_ne!(pack("10.0.0.5".parse().expect("ip")), 0x0a00_0005);
    }

    #[test]
    fn a_cidr_keeps_its_host_bits() {
        let net = cidr("10.0.0.5/24").expect("cidr");
        assert_eq!(net.addr().to_string(), "10.0.0.5");
        assert_eq!(net.prefix_len(), 24);
        for bad in ["10.0.0.5", "10.0.0.5/33", "x/24", "", "10.0.0/24"] {
            assert!(cidr(bad).is_none(), "{bad}");
        }
        let (lo, hi) = bounds(&net);
        assert_eq!(
            (unpack(lo).to_string(), unpack(hi).to_string()),
            ("10.0.0.0".into(), "10.0.0.255".into())
        );
    }
}
