use super::*;
use crate::addresses::ip::unpack;
use crate::api::network_configuration::IpRange;

fn ipam(subnet: &str, gateway: Option<&str>, dns: &[&str], ranges: &[(&str, &str)]) -> Ipam {
    Ipam {
        subnet: subnet.into(),
        gateway: gateway.map(Into::into),
        dns: dns.iter().map(|d| (*d).into()).collect(),
        ranges: (ranges.iter())
            .map(|(s, e)| IpRange {
                start: (*s).into(),
                end: (*e).into(),
            })
            .collect(),
    }
}

fn errors(i: &Ipam) -> Vec<String> {
    match Pool::check(i, &FieldPath::new("spec").child("ipam")) {
        Ok(_) => Vec::new(),
        Err(e) => e.iter().map(|e| e.field.clone()).collect(),
    }
}

#[test]
fn each_mistake_is_refused_naming_its_field() {
    let cases: &[(Ipam, &[&str])] = &[
        (
            ipam(
                "10.0.0.0/24",
                Some("10.0.0.1"),
                &["10.0.0.2"],
                &[("10.0.0.10", "10.0.0.20")],
            ),
            &[],
        ),
        (
            ipam(
                "fd00::/64",
                Some("fd00::1"),
                &[],
                &[("fd00::10", "fd00::ff")],
            ),
            &[],
        ),
        (ipam("10.0.0.0", None, &[], &[]), &["spec.ipam.subnet"]),
        (ipam("10.0.0.5/24", None, &[], &[]), &["spec.ipam.subnet"]),
        (
            ipam("10.0.0.0/24", Some("10.0.1.1"), &[], &[]),
            &["spec.ipam.gateway"],
        ),
        (
            ipam("10.0.0.0/24", Some("nope"), &[], &[]),
            &["spec.ipam.gateway"],
        ),
        (
            ipam("10.0.0.0/24", None, &["10.0.0.2", "8.8.8.8"], &[]),
            &["spec.ipam.dns[1]"],
        ),
        (
            ipam("10.0.0.0/24", None, &[], &[("10.0.0.20", "10.0.0.10")]),
            &["spec.ipam.ranges[0].end"],
        ),
        (
            ipam("10.0.0.0/24", None, &[], &[("10.0.0.10", "10.0.1.10")]),
            &["spec.ipam.ranges[0].end"],
        ),
        (
            ipam(
                "10.0.0.0/24",
                None,
                &[],
                &[("10.0.0.10", "10.0.0.20"), ("10.0.0.20", "10.0.0.30")],
            ),
            &["spec.ipam.ranges[1].start"],
        ),
        (
            ipam(
                "10.0.0.0/24",
                None,
                &[],
                &[("10.0.0.50", "10.0.0.60"), ("10.0.0.10", "10.0.0.20")],
            ),
            &["spec.ipam.ranges[1].start"],
        ),
        (
            ipam("10.0.0.0/24", None, &[], &[("fd00::1", "fd00::2")]),
            &["spec.ipam.ranges[0].start", "spec.ipam.ranges[0].end"],
        ),
    ];
    for (i, want) in cases {
        assert_eq!(errors(i), *want, "{i:?}");
    }
}

#[test]
fn without_ranges_the_subnet_hosts_are_handed_out() {
    let at = FieldPath::new("spec");
    let cases = [
        ("10.0.0.0/24", "10.0.0.1", "10.0.0.254"),
        ("10.0.0.0/31", "10.0.0.0", "10.0.0.1"),
        ("fd00::/120", "fd00::1", "fd00::ff"),
    ];
    for (subnet, first, last) in cases {
        let pool = Pool::check(&ipam(subnet, None, &[], &[]), &at).expect("pool");
        let (lo, hi) = pool.ranges[0];
        assert_eq!(
            (unpack(lo).to_string(), unpack(hi).to_string()),
            (first.into(), last.into())
        );
    }
    let pool = Pool::check(&ipam("10.0.0.0/24", Some("10.0.0.1"), &[], &[]), &at).expect("pool");
    for (ip, reserved) in [
        ("10.0.0.0", true),
        ("10.0.0.255", true),
        ("10.0.0.1", true),
        ("10.0.0.2", false),
    ] {
        assert_eq!(pool.reserved(ip.parse().expect("ip")), reserved, "{ip}");
    }
}
