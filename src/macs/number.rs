//! A MAC address as the index keeps it: a 48-bit number.

use crate::machine::names::parse_mac;

/// An address as a 48-bit number (either separator, either case).
pub fn mac_number(s: &str) -> Option<u64> {
    parse_mac(s).map(|b| b.iter().fold(0u64, |acc, o| (acc << 8) | u64::from(*o)))
}

/// `02:1a:2b:3c:4d:5e`: lower case, colons, as KubeVirt reports it.
pub fn format_mac(mac: u64) -> String {
    let b = mac.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}
