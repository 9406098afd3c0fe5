//! The cloud-init network-config (version 2) the VM gets when its Machine's interfaces have
//! addresses and the user wrote no `networkData` of their own (pure). Each interface is matched
//! by its MAC (the operator gives every interface one), so the guest's own names do not matter:
//! `nicN` is only the config's key, N the interface's place in `spec.networks`.

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use super::held::spec_address;
use super::pool::Pool;

/// One interface of the Machine, in `spec.networks` order.
pub struct Nic<'a> {
    pub mac: Option<&'a str>,
    pub addresses: &'a [String],
    /// Its NetworkConfiguration's ipam, if it has one.
    pub pool: Option<&'a Pool>,
}

/// The network-config, or `None` when no interface has an address (the guest keeps its DHCP
/// default). Interfaces without addresses get DHCP; those without a MAC cannot be matched and
/// are left out. One default route per address family: the first interface whose address is in
/// a subnet with a gateway gets it.
pub fn render(nics: &[Nic]) -> Option<String> {
    if !nics
        .iter()
        .any(|n| !n.addresses.is_empty() && n.mac.is_some())
    {
        return None;
    }
    let mut ethernets = Map::new();
    let (mut v4_route, mut v6_route) = (false, false);
    for (i, nic) in nics.iter().enumerate() {
        let Some(mac) = nic.mac else { continue };
        let mut eth = Map::new();
        eth.insert(
            "match".into(),
            json!({"macaddress": mac.to_ascii_lowercase()}),
        );
        if nic.addresses.is_empty() {
            eth.insert("dhcp4".into(), Value::Bool(true));
            ethernets.insert(format!("nic{i}"), Value::Object(eth));
            continue;
        }
        eth.insert("addresses".into(), json!(nic.addresses));
        if let Some(pool) = nic.pool {
            let inside: Vec<IpAddr> = (nic.addresses.iter())
                .filter_map(|a| spec_address(a))
                .filter(|ip| pool.subnet.contains(ip))
                .collect();
            let mut routes = Vec::new();
            if let Some(gw) = pool.gateway.filter(|_| !inside.is_empty()) {
                let (taken, to) = match gw {
                    IpAddr::V4(_) => (&mut v4_route, "0.0.0.0/0"),
                    IpAddr::V6(_) => (&mut v6_route, "::/0"),
                };
                if !*taken {
                    *taken = true;
                    routes.push(json!({"to": to, "via": gw.to_string()}));
                }
            }
            if !routes.is_empty() {
                eth.insert("routes".into(), Value::Array(routes));
            }
            if !pool.dns.is_empty() && !inside.is_empty() {
                let dns: Vec<String> = pool.dns.iter().map(IpAddr::to_string).collect();
                eth.insert("nameservers".into(), json!({"addresses": dns}));
            }
        }
        ethernets.insert(format!("nic{i}"), Value::Object(eth));
    }
    let config = json!({"version": 2, "ethernets": ethernets});
    serde_yaml::to_string(&config).ok()
}

#[cfg(test)]
mod tests;
