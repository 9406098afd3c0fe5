//! A NetworkConfiguration's `ipam`, checked and packed (pure): the subnet, the gateway and DNS
//! servers inside it, and the ranges handed out, in order and not overlapping.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::api::network_configuration::Ipam;
use crate::machine::{FieldError, FieldPath};

use super::ip::{address, bounds, cidr, pack};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The subnet, host bits cleared.
    pub subnet: IpNet,
    pub gateway: Option<IpAddr>,
    pub dns: Vec<IpAddr>,
    /// Packed `[start, end]` pairs, ordered, disjoint, inside the subnet.
    pub ranges: Vec<(u128, u128)>,
}

impl Pool {
    /// The pool `ipam` describes, or every error in it (paths under `path`, e.g. `spec.ipam`).
    pub fn check(ipam: &Ipam, path: &FieldPath) -> Result<Pool, Vec<FieldError>> {
        let mut errors = Vec::new();
        let sub = path.child("subnet");
        let Some(given) = cidr(&ipam.subnet) else {
            return Err(vec![FieldError::invalid(
                &sub,
                ipam.subnet.as_str(),
                "must be a CIDR such as 10.0.0.0/24 or fd00::/64",
            )]);
        };
        let subnet = given.trunc();
        if subnet.addr() != given.addr() {
            errors.push(FieldError::invalid(
                &sub,
                ipam.subnet.as_str(),
                format!("has host bits set; the subnet is {subnet}"),
            ));
        }
        let inside = |field: &FieldPath, s: &str, errors: &mut Vec<FieldError>| {
            let why = match address(s) {
                None => "must be an IP address".to_owned(),
                Some(ip) if !subnet.contains(&ip) => format!("is outside the subnet {subnet}"),
                Some(ip) => return Some(ip),
            };
            errors.push(FieldError::invalid(field, s, why));
            None
        };
        let gateway = ipam
            .gateway
            .as_deref()
            .and_then(|g| inside(&path.child("gateway"), g, &mut errors));
        let dns_path = path.child("dns");
        let dns = (ipam.dns.iter().enumerate())
            .filter_map(|(i, d)| inside(&dns_path.index(i), d, &mut errors))
            .collect();
        let ranges_path = path.child("ranges");
        let mut ranges: Vec<(u128, u128)> = Vec::with_capacity(ipam.ranges.len());
        for (i, r) in ipam.ranges.iter().enumerate() {
            let at = ranges_path.index(i);
            let start = inside(&at.child("start"), &r.start, &mut errors).map(pack);
            let end = inside(&at.child("end"), &r.end, &mut errors).map(pack);
            let (Some(start), Some(end)) = (start, end) else {
                continue;
            };
            if start > end {
                errors.push(FieldError::invalid(
                    &at.child("end"),
                    r.end.as_str(),
                    format!("comes before start {}", r.start),
                ));
            } else if let Some(&(_, prev_end)) = ranges.last().filter(|(_, e)| *e >= start) {
                errors.push(FieldError::invalid(
                    &at.child("start"),
                    r.start.as_str(),
                    format!(
                        "must come after the end of ranges[{}] ({}): ranges are in order and do not overlap",
                        i - 1,
                        super::ip::unpack(prev_end)
                    ),
                ));
            } else {
                ranges.push((start, end));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        if ipam.ranges.is_empty() {
            ranges.push(hosts(&subnet));
        }
        Ok(Pool {
            subnet,
            gateway,
            dns,
            ranges,
        })
    }

    /// Whether `ip` is the subnet's own address or (IPv4) its broadcast: never a host's.
    pub fn reserved(&self, ip: IpAddr) -> bool {
        let (lo, hi) = hosts(&self.subnet);
        let n = pack(ip);
        n < lo || n > hi || Some(ip) == self.gateway
    }
}

/// The host addresses of `subnet`: without the network address, and for IPv4 the broadcast
/// (both only where the subnet has room for hosts besides them).
fn hosts(subnet: &IpNet) -> (u128, u128) {
    let (lo, hi) = bounds(subnet);
    match subnet {
        IpNet::V4(n) if n.prefix_len() <= 30 => (lo + 1, hi - 1),
        IpNet::V6(n) if n.prefix_len() <= 126 => (lo + 1, hi),
        _ => (lo, hi),
    }
}

#[cfg(test)]
mod tests;
