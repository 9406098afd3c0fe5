//! A Machine's network interfaces: unique names, a NetworkConfiguration named in each, a known
//! NIC model, a unicast MAC address used once, and static addresses written as CIDRs.

use std::collections::HashMap;

use crate::api::machine::{MAX_ADDRESSES, NIC_MODELS, Network};

use super::super::field_error::{FieldError, FieldPath};
use super::super::names::{dns1123_label, dns1123_subdomain, parse_mac};
use super::{Outcome, check_enum, push_all};

/// networkName becomes a label value.
pub const MAX_NETWORK_NAME: usize = 63;

pub(super) fn validate_networks(out: &mut Outcome, path: &FieldPath, networks: &[Network]) {
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut macs: HashMap<[u8; 6], usize> = HashMap::new();
    for (i, net) in networks.iter().enumerate() {
        let p = path.index(i);
        let name_path = p.child("name");
        if net.name.is_empty() {
            out.errors.push(FieldError::required(&name_path, ""));
        } else {
            push_all(out, &name_path, &net.name, dns1123_label(&net.name));
            if names.insert(&net.name, i).is_some() {
                out.errors
                    .push(FieldError::duplicate(&name_path, net.name.as_str()));
            }
        }
        let nn_path = p.child("networkName");
        if net.network_name.is_empty() {
            out.errors.push(FieldError::required(
                &nn_path,
                "the name of a NetworkConfiguration in the Machine's namespace",
            ));
        } else {
            push_all(
                out,
                &nn_path,
                &net.network_name,
                dns1123_subdomain(&net.network_name),
            );
            if net.network_name.len() > MAX_NETWORK_NAME {
                out.errors
                    .push(FieldError::too_long(&nn_path, MAX_NETWORK_NAME));
            }
        }
        check_enum(out, &p.child("model"), net.model.as_deref(), NIC_MODELS);
        if let Some(mac) = &net.mac_address {
            let mac_path = p.child("macAddress");
            match parse_mac(mac) {
                None => out.errors.push(FieldError::invalid(
                    &mac_path,
                    mac.as_str(),
                    "must be a MAC address of six hexadecimal octets separated by ':' or '-' (e.g. 52:54:00:12:34:56)",
                )),
                Some(octets) if octets[0] & 1 == 1 => out.errors.push(FieldError::invalid(
                    &mac_path,
                    mac.as_str(),
                    "must be a unicast MAC address (the least significant bit of the first octet must be 0)",
                )),
                Some(octets) if octets == [0; 6] => {
                    out.errors.push(FieldError::invalid(&mac_path, mac.as_str(), "must not be all zeros"))
                }
                Some(octets) => {
                    if macs.insert(octets, i).is_some() {
                        out.errors.push(FieldError::duplicate(&mac_path, mac.as_str()));
                    }
                }
            }
        }
        validate_addresses(out, &p.child("addresses"), &net.addresses);
    }
}

/// Each address a CIDR (the address with its prefix), none twice. Whether it fits the network
/// and is free is for the admission webhook, which knows the NetworkConfigurations and the
/// other Machines (`crate::admission::addresses`).
fn validate_addresses(out: &mut Outcome, path: &FieldPath, addresses: &[String]) {
    if addresses.len() > MAX_ADDRESSES {
        out.errors
            .push(FieldError::too_many(path, addresses.len(), MAX_ADDRESSES));
        return;
    }
    let mut seen = Vec::with_capacity(addresses.len());
    for (j, a) in addresses.iter().enumerate() {
        let at = path.index(j);
        match a.parse::<ipnet::IpNet>() {
            Err(_) => out.errors.push(FieldError::invalid(
                &at,
                a.as_str(),
                "must be an address with its prefix length (CIDR), e.g. 10.0.0.5/24 or fd00::5/64",
            )),
            Ok(net) if seen.contains(&net.addr()) => {
                out.errors.push(FieldError::duplicate(&at, a.as_str()))
            }
            Ok(net) => seen.push(net.addr()),
        }
    }
}
