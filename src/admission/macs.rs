//! MAC addresses at admission: the mutating webhook gives every interface without one a
//! stable address, and the validating webhook refuses a new address another Machine uses
//! (the index is in `crate::macs`).

use std::collections::HashSet;

use serde_json::Value;

use crate::api::machine::Network;
use crate::machine::{FieldError, FieldPath};
use crate::macs::LiveMacs;
use crate::macs::index::mac_number;

use super::review::Request;

pub const MACS_NOT_LOADED: &str = "this replica of kubevirt-operator has not listed the Machines' MAC addresses yet (is it allowed to list and watch machines.vitistack.io?); retry shortly";

/// `namespace/name`, as the MAC index names Machines.
pub fn machine_key(req: &Request, name: &str) -> String {
    format!("{}/{name}", req.namespace.as_deref().unwrap_or_default())
}

/// The address the stored Machine had for interface `name`: in its spec, else the one the VMI
/// reported (KubeVirt's random one, kept so adopting it changes nothing in the guest).
fn stored_address<'a>(old: Option<&'a Value>, name: &str) -> Option<&'a str> {
    let named = |list: Option<&'a Value>| {
        list?
            .as_array()?
            .iter()
            .find(|n| n.get("name").and_then(Value::as_str) == Some(name))?
            .get("macAddress")?
            .as_str()
    };
    let old = old?;
    named(old.pointer("/spec/networks")).or_else(|| named(old.pointer("/status/interfaces")))
}

/// Fills `macAddress` of every network without one; `Err` only when no free address could be
/// drawn. `key` is the Machine's `namespace/name` (an address it holds is its own).
pub fn fill(
    networks: &mut [Network],
    old: Option<&Value>,
    key: &str,
    macs: &LiveMacs,
) -> Result<(), String> {
    for n in networks.iter_mut().filter(|n| n.mac_address.is_none()) {
        let kept = stored_address(old, &n.name)
            .filter(|m| mac_number(m).is_some())
            .filter(|m| macs.owner(m).is_none_or(|o| o == key));
        n.mac_address = match kept {
            Some(m) => Some(m.to_owned()),
            None => Some(macs.allocate().ok_or_else(|| {
                format!(
                    "no free MAC address could be drawn for spec.networks[{:?}]",
                    n.name
                )
            })?),
        };
    }
    Ok(())
}

/// Errors for each address `networks` sets that the stored spec did not and another Machine
/// uses; `Err` when the index cannot tell yet.
pub fn duplicate_errors(
    networks: &[Network],
    old: Option<&Value>,
    key: &str,
    macs: &LiveMacs,
) -> Result<Vec<FieldError>, &'static str> {
    let before: HashSet<u64> = old
        .and_then(|o| o.pointer("/spec/networks")?.as_array())
        .into_iter()
        .flatten()
        .filter_map(|n| n.get("macAddress")?.as_str().and_then(mac_number))
        .collect();
    let new: Vec<(usize, &str)> = networks
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((i, n.mac_address.as_deref()?)))
        .filter(|(_, m)| mac_number(m).is_some_and(|m| !before.contains(&m)))
        .collect();
    if new.is_empty() {
        return Ok(Vec::new());
    }
    if !macs.loaded() {
        return Err(MACS_NOT_LOADED);
    }
    let root = FieldPath::new("spec");
    let path = root.child("networks");
    Ok(new
        .into_iter()
        .filter_map(|(i, mac)| {
            let owner = macs.owner(mac).filter(|o| o != key)?;
            let mut e = FieldError::duplicate(&path.index(i).child("macAddress"), mac);
            e.detail = format!("already used by Machine {owner}");
            Some(e)
        })
        .collect())
}

#[cfg(test)]
mod tests;
