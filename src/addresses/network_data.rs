//! Where the user's own cloud-init `networkData` contradicts the addresses (pure): it wins over
//! the derived network-config, so an address it gives an interface (matched by MAC, version 2)
//! other than the ones the Machine holds there would put the guest on an address the index
//! does not know. Network data that is no YAML, or version 1, says nothing this can check.

use std::net::IpAddr;

use serde_json::Value;

use crate::machine::names::parse_mac as mac_number;
use crate::machine::{FieldError, FieldPath};

use super::held::spec_address;
use super::ip::address;

/// One interface of the Machine: its place in `spec.networks`, its MAC, its addresses.
pub struct Iface<'a> {
    pub index: usize,
    pub mac: &'a str,
    pub addresses: &'a [String],
}

/// The errors, on `spec.cloudInit.networkData`, for each address it gives an interface with
/// addresses that is not one of them.
pub fn contradictions(network_data: &str, ifaces: &[Iface]) -> Vec<FieldError> {
    let Ok(doc) = serde_yaml::from_str::<Value>(network_data) else {
        return Vec::new();
    };
    let root = doc.get("network").unwrap_or(&doc);
    let Some(ethernets) = root.get("ethernets").and_then(Value::as_object) else {
        return Vec::new();
    };
    let root = FieldPath::new("spec");
    let cloud_init = root.child("cloudInit");
    let field = cloud_init.child("networkData");
    let mut errors = Vec::new();
    for (name, eth) in ethernets {
        let mac = eth.pointer("/match/macaddress").and_then(Value::as_str);
        let Some(mac) = mac.and_then(mac_number) else {
            continue;
        };
        let iface = ifaces.iter().find(|i| mac_number(i.mac) == Some(mac));
        let Some(iface) = iface.filter(|i| !i.addresses.is_empty()) else {
            continue;
        };
        let held: Vec<IpAddr> = iface
            .addresses
            .iter()
            .filter_map(|a| spec_address(a))
            .collect();
        let given = eth.get("addresses").and_then(Value::as_array);
        for text in given.into_iter().flatten().filter_map(written) {
            let ip = spec_address(text).or_else(|| address(text));
            if ip.is_some_and(|ip| !held.contains(&ip)) {
                errors.push(FieldError::invalid(
                    &field,
                    text,
                    format!(
                        "ethernets.{name} (MAC {}) gives address {text}, but spec.networks[{}].addresses is {}: the network data must not contradict the Machine's addresses",
                        iface.mac,
                        iface.index,
                        iface.addresses.join(", ")
                    ),
                ));
            }
        }
    }
    errors
}

/// An entry of `addresses`: a string, or netplan's one-key map form (`{"10.0.0.5/24": {..}}`).
fn written(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(m) if m.len() == 1 => m.keys().next().map(String::as_str),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: &str = "02:00:00:00:00:0a";

    fn fields(data: &str) -> Vec<String> {
        let addresses = ["10.0.0.5/24".to_owned(), "fd00::5/64".to_owned()];
        let ifaces = [
            Iface {
                index: 0,
                mac: MAC,
                addresses: &addresses,
            },
            Iface {
                index: 1,
                mac: "02:00:00:00:00:0b",
                addresses: &[],
            },
        ];
        contradictions(data, &ifaces)
            .into_iter()
            .map(|e| e.value.to_string())
            .collect()
    }

    #[test]
    fn only_a_different_address_for_the_interface_contradicts() {
        let cases: [(&str, &[&str]); 9] = [
            (
                "version: 2\nethernets:\n  e:\n    match: {macaddress: '02:00:00:00:00:0A'}\n    addresses: [10.0.0.5/24]\n",
                &[],
            ),
            // The prefix is the guest's business; the address is the index's.
            (
                "version: 2\nethernets:\n  e:\n    match: {macaddress: '02:00:00:00:00:0a'}\n    addresses: [10.0.0.5/16, 'fd00::5/64']\n",
                &[],
            ),
            (
                "version: 2\nethernets:\n  e:\n    match: {macaddress: '02-00-00-00-00-0a'}\n    addresses: [10.0.0.9/24]\n",
                &["\"10.0.0.9/24\""],
            ),
            (
                "network:\n  version: 2\n  ethernets:\n    e:\n      match: {macaddress: '02:00:00:00:00:0a'}\n      addresses: [{10.0.0.6/24: {label: x}}]\n",
                &["\"10.0.0.6/24\""],
            ),
            // Another MAC, an interface without addresses, DHCP, version 1, no YAML: nothing.
            (
                "version: 2\nethernets:\n  e:\n    match: {macaddress: '02:00:00:00:00:0c'}\n    addresses: [10.0.0.9/24]\n",
                &[],
            ),
            (
                "version: 2\nethernets:\n  e:\n    match: {macaddress: '02:00:00:00:00:0b'}\n    addresses: [10.0.0.9/24]\n",
                &[],
            ),
            (
                "version: 2\nethernets:\n  e:\n    match: {macaddress: '02:00:00:00:00:0a'}\n    dhcp4: true\n",
                &[],
            ),
            (
                "version: 1\nconfig:\n- type: physical\n  mac_address: '02:00:00:00:00:0a'\n",
                &[],
            ),
            ("{{not yaml", &[]),
        ];
        for (data, want) in cases {
            assert_eq!(fields(data), *want, "{data}");
        }
    }
}
