//! Static addresses at admission: the mutating webhook gives every interface on a network with
//! `ipam` that sets no addresses a free one (kept across updates), and the validating webhook
//! refuses an address outside the subnet, one another Machine holds on the same
//! NetworkConfiguration (naming it), and user network data that contradicts them. The index is
//! in `crate::addresses`.

use std::collections::HashSet;
use std::net::IpAddr;

use serde_json::Value;

use crate::addresses::LiveAddresses;
use crate::addresses::held::{Origin, spec_address};
use crate::addresses::ip::{address, pack};
use crate::addresses::network_data::{Iface, contradictions};
use crate::api::machine::{CloudInit, Network};
use crate::machine::{FieldError, FieldPath};

pub const ADDRESSES_NOT_LOADED: &str = "this replica of kubevirt-operator has not listed the Machines' addresses and the NetworkConfigurations yet (is it allowed to list and watch machines and networkconfigurations.vitistack.io?); retry shortly";

/// Why an interface could not be given an address.
#[derive(Debug, PartialEq)]
pub enum FillError {
    NotLoaded,
    /// Every address of the network's ranges is taken: the field error says which.
    Exhausted(FieldError),
}

/// The stored interface `name` (its spec entry and what its VM reports), if it was on
/// NetworkConfiguration `network` then too.
fn stored<'a>(
    old: Option<&'a Value>,
    name: &str,
    network: &str,
) -> Option<(&'a Value, Option<&'a Value>)> {
    let named = |list: Option<&'a Value>| {
        list?
            .as_array()?
            .iter()
            .find(|n| n.get("name").and_then(Value::as_str) == Some(name))
    };
    let old = old?;
    let spec = named(old.pointer("/spec/networks"))?;
    (spec.get("networkName").and_then(Value::as_str) == Some(network))
        .then(|| (spec, named(old.pointer("/status/interfaces"))))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    let list = v.and_then(Value::as_array).into_iter().flatten();
    list.filter_map(Value::as_str).map(str::to_owned).collect()
}

/// Fills `addresses` of every interface without any on a network with ipam: what the stored
/// Machine had there, else what its VM reports inside the subnet (a Machine from before the
/// rule; kept when no other Machine holds it), else a free address of the ranges.
pub fn fill(
    networks: &mut [Network],
    old: Option<&Value>,
    namespace: &str,
    key: &str,
    live: &LiveAddresses,
) -> Result<(), FillError> {
    let root = FieldPath::new("spec");
    let path = root.child("networks");
    for (i, n) in networks.iter_mut().enumerate() {
        if !n.addresses.is_empty() {
            continue;
        }
        if !live.loaded() {
            return Err(FillError::NotLoaded);
        }
        let network = format!("{namespace}/{}", n.network_name);
        let Some(pool) = live.pool(&network) else {
            continue;
        };
        let before = stored(old, &n.name, &n.network_name);
        let kept = before
            .map(|(s, _)| strings(s.get("addresses")))
            .unwrap_or_default();
        if !kept.is_empty() {
            n.addresses = kept;
            continue;
        }
        let reported = before
            .and_then(|(_, st)| st)
            .map(|st| strings(st.get("ipAddresses")));
        let mine = |ip: &IpAddr| {
            pool.subnet.contains(ip)
                && live
                    .taken_by(&network, pack(*ip))
                    .is_none_or(|(k, _)| k == key)
        };
        let adopted: Vec<String> = (reported.unwrap_or_default().iter())
            .filter_map(|a| address(a))
            .filter(mine)
            .map(|ip| format!("{ip}/{}", pool.subnet.prefix_len()))
            .collect();
        if !adopted.is_empty() {
            n.addresses = adopted;
            continue;
        }
        match live.allocate(&network, &pool, key) {
            Some(a) => n.addresses = vec![a],
            None => {
                let at = path.index(i);
                return Err(FillError::Exhausted(FieldError::invalid(
                    &at.child("addresses"),
                    Value::Null,
                    format!(
                        "NetworkConfiguration {} has no free address left in its ipam ranges",
                        n.network_name
                    ),
                )));
            }
        }
    }
    Ok(())
}

/// Errors for each address `networks` sets that the stored spec did not set on the same
/// NetworkConfiguration and that is outside the network's subnet, its network, broadcast or
/// gateway address, or held by another Machine; `Err` when the index cannot tell yet.
pub fn errors(
    networks: &[Network],
    old: Option<&Value>,
    namespace: &str,
    key: &str,
    live: &LiveAddresses,
) -> Result<Vec<FieldError>, &'static str> {
    let root = FieldPath::new("spec");
    let path = root.child("networks");
    let mut errors = Vec::new();
    let mut mine: HashSet<(String, u128)> = HashSet::new();
    for (i, n) in networks.iter().enumerate() {
        let before = stored(old, &n.name, &n.network_name);
        let before: Vec<IpAddr> = (before.map(|(s, _)| strings(s.get("addresses"))))
            .unwrap_or_default()
            .iter()
            .filter_map(|a| spec_address(a))
            .collect();
        let network = format!("{namespace}/{}", n.network_name);
        for (j, text) in n.addresses.iter().enumerate() {
            let Some(ip) = spec_address(text) else {
                continue; // the static rules name it
            };
            let at = path.index(i);
            let list = at.child("addresses");
            let field = list.index(j);
            if !mine.insert((network.clone(), pack(ip))) {
                errors.push(FieldError::duplicate(&field, text.as_str()));
                continue;
            }
            if before.contains(&ip) {
                continue;
            }
            if !live.loaded() {
                return Err(ADDRESSES_NOT_LOADED);
            }
            if let Some(pool) = live.pool(&network) {
                let prefix = text.rsplit('/').next().and_then(|p| p.parse::<u8>().ok());
                let why = if !pool.subnet.contains(&ip) {
                    Some(format!(
                        "is outside the subnet {} of NetworkConfiguration {}",
                        pool.subnet, n.network_name
                    ))
                } else if prefix != Some(pool.subnet.prefix_len()) {
                    Some(format!(
                        "must have the subnet's prefix /{}",
                        pool.subnet.prefix_len()
                    ))
                } else if pool.reserved(ip) {
                    Some(format!(
                        "is the subnet's network, broadcast or gateway address ({})",
                        pool.subnet
                    ))
                } else {
                    None
                };
                if let Some(why) = why {
                    errors.push(FieldError::invalid(&field, text.as_str(), why));
                    continue;
                }
            }
            if let Some((owner, origin)) =
                live.taken_by(&network, pack(ip)).filter(|(o, _)| o != key)
            {
                let mut e = FieldError::duplicate(&field, text.as_str());
                e.detail = match origin {
                    Origin::Spec => format!(
                        "already used on NetworkConfiguration {} by Machine {owner}",
                        n.network_name
                    ),
                    Origin::Reported => format!(
                        "already used on NetworkConfiguration {} by Machine {owner} (its VM reports it in status)",
                        n.network_name
                    ),
                };
                errors.push(e);
            }
        }
    }
    Ok(errors)
}

/// Errors where the user's own network data gives an interface another address (pure).
pub fn network_data_errors(
    networks: &[Network],
    cloud_init: Option<&CloudInit>,
) -> Vec<FieldError> {
    let Some(data) = cloud_init.and_then(|c| c.network_data.as_deref()) else {
        return Vec::new();
    };
    let ifaces: Vec<Iface> = (networks.iter().enumerate())
        .filter(|(_, n)| !n.addresses.is_empty())
        .filter_map(|(index, n)| {
            Some(Iface {
                index,
                mac: n.mac_address.as_deref()?,
                addresses: &n.addresses,
            })
        })
        .collect();
    if ifaces.is_empty() {
        return Vec::new();
    }
    contradictions(data, &ifaces)
}

#[cfg(test)]
mod tests;
