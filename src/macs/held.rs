//! Which address a Machine holds on each interface (pure): the one its spec sets, else the one
//! its VM reports in status (a Machine admitted before the operator wrote addresses into specs,
//! or while no webhook ran), else none. The index, the draw of new addresses and the refusal of
//! taken ones all go by this one rule.

use super::number::mac_number;

/// Where a held address comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `spec.networks[].macAddress`: admitted against the index.
    Spec,
    /// `status.interfaces[].macAddress` of an interface whose spec sets none: the VM's own,
    /// written into the spec by the mutating webhook at the Machine's next write.
    Reported,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// The address as a 48-bit number.
    pub mac: u64,
    pub origin: Origin,
}

/// The bit above any address that marks [`Origin::Reported`] in the index's compact form.
const REPORTED: u64 = 1 << 63;

impl Held {
    pub fn spec(mac: u64) -> Self {
        Held {
            mac,
            origin: Origin::Spec,
        }
    }

    pub fn reported(mac: u64) -> Self {
        Held {
            mac,
            origin: Origin::Reported,
        }
    }

    /// One `u64`, as the index keeps it: an address costs what it did before origins existed.
    pub fn packed(self) -> u64 {
        match self.origin {
            Origin::Spec => self.mac,
            Origin::Reported => self.mac | REPORTED,
        }
    }

    pub fn unpacked(packed: u64) -> Self {
        Held {
            mac: packed & !REPORTED,
            origin: if packed & REPORTED == 0 {
                Origin::Spec
            } else {
                Origin::Reported
            },
        }
    }
}

/// The address held on one interface, given its spec's `macAddress` and the one its VM reports
/// for the same interface name. A spec value, once set, decides alone: what the VM reports then
/// is the old address of a change still waiting for a restart, or an address the spec
/// replaced, and holds nothing. A value that is no address holds nothing.
pub fn held(spec: Option<&str>, reported: Option<&str>) -> Option<Held> {
    match spec {
        Some(s) => mac_number(s).map(Held::spec),
        None => reported.and_then(mac_number).map(Held::reported),
    }
}

/// Every address a Machine holds: per spec network (its name and `macAddress`), with
/// `reported` giving what the VM reports for an interface name. Interfaces only in status
/// (the pod network of a Machine without networks, one since removed from the spec) hold none.
pub fn held_by<'a>(
    networks: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    reported: impl Fn(&str) -> Option<&'a str>,
) -> Vec<Held> {
    networks
        .into_iter()
        .filter_map(|(name, spec)| held(spec, if spec.is_none() { reported(name) } else { None }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "52:54:00:00:00:0a";
    const B: &str = "52:54:00:00:00:0b";

    fn n(s: &str) -> u64 {
        mac_number(s).expect("mac")
    }

    #[test]
    fn spec_else_reported_else_none() {
        let cases: [(Option<&str>, Option<&str>, Option<Held>); 7] = [
            (Some(A), None, Some(Held::spec(n(A)))),
            (Some(A), Some(B), Some(Held::spec(n(A)))),
            (None, Some(B), Some(Held::reported(n(B)))),
            (None, Some("52-54-00-00-00-0B"), Some(Held::reported(n(B)))),
            (None, None, None),
            // A spec value decides even when it is no address: the VM never gets the reported.
            (Some("nope"), Some(B), None),
            (None, Some("garbage"), None),
        ];
        for (spec, reported, want) in cases {
            assert_eq!(
                held(spec, reported),
                want,
                "spec {spec:?}, reported {reported:?}"
            );
        }
    }

    #[test]
    fn only_spec_networks_hold_and_each_looks_up_its_own_interface() {
        let status = [("eth0", A), ("eth1", B), ("default", "52:54:00:00:00:0c")];
        let reported = |name: &str| status.iter().find(|(n, _)| *n == name).map(|(_, m)| *m);
        let got = held_by(
            [
                ("eth0", Some("02:00:00:00:00:01")),
                ("eth1", None),
                ("eth2", None),
            ],
            reported,
        );
        assert_eq!(
            got,
            [Held::spec(n("02:00:00:00:00:01")), Held::reported(n(B))]
        );
        assert!(
            held_by([], reported).is_empty(),
            "the pod network holds none"
        );
    }

    #[test]
    fn the_compact_form_keeps_address_and_origin() {
        for h in [
            Held::spec(0xffff_ffff_ffff),
            Held::reported(0x0200_0000_0001),
        ] {
            assert_eq!(Held::unpacked(h.packed()), h);
        }
        assert_eq!(
            Held::spec(5).packed(),
            5,
            "a spec address is stored as before"
        );
    }
}
