//! MAC addresses at admission: the mutating webhook gives every interface without one a
//! stable address, and the validating webhook refuses a new address another Machine uses
//! (the index is in `crate::macs`).

use std::collections::HashSet;

use serde_json::Value;

use crate::api::machine::Network;
use crate::machine::{FieldError, FieldPath};
use crate::macs::LiveMacs;
use crate::macs::held::{Held, Origin, held};
use crate::macs::index::mac_number;

use super::review::Request;

pub const MACS_NOT_LOADED: &str = "this replica of kubevirt-operator has not listed the Machines' MAC addresses yet (is it allowed to list and watch machines.vitistack.io?); retry shortly";

/// `namespace/name`, as the MAC index names Machines.
pub fn machine_key(req: &Request, name: &str) -> String {
    format!("{}/{name}", req.namespace.as_deref().unwrap_or_default())
}

/// The address the stored Machine holds on interface `name`, as [`held`] decides (its spec's,
/// else the one its VM reports: KubeVirt's random one, kept so adopting it changes nothing in
/// the guest), with the text it is written as.
fn stored_address<'a>(old: Option<&'a Value>, name: &str) -> Option<(&'a str, Held)> {
    let named = |list: Option<&'a Value>| {
        list?
            .as_array()?
            .iter()
            .find(|n| n.get("name").and_then(Value::as_str) == Some(name))
    };
    let mac = |v: &'a Value| v.get("macAddress").and_then(Value::as_str);
    let old = old?;
    // Only an interface the spec lists holds an address (as in the index).
    let spec = mac(named(old.pointer("/spec/networks"))?);
    let reported = named(old.pointer("/status/interfaces")).and_then(mac);
    let held = held(spec, reported)?;
    let text = match held.origin {
        Origin::Spec => spec?,
        Origin::Reported => reported?,
    };
    Some((text, held))
}

/// What an interface without an address gets (pure).
#[derive(Debug, PartialEq, Eq)]
enum Choice<'a> {
    /// What the stored Machine holds on it: the guest's address stays.
    Keep,
    /// A free address: it held none.
    Draw,
    /// A free address: Machine `.0` holds the one it had (two Machines stored with one
    /// address, past the webhook); said in a warning.
    Taken(&'a str),
}

/// `stored`: whether the stored Machine holds an address on the interface; `holder`: which
/// Machine the index says holds that address; `key`: this Machine.
fn choose<'a>(stored: bool, holder: Option<&'a str>, key: &str) -> Choice<'a> {
    match holder {
        _ if !stored => Choice::Draw,
        Some(other) if other != key => Choice::Taken(other),
        _ => Choice::Keep,
    }
}

/// Fills `macAddress` of every network without one, and says in warnings each address given
/// up; `Err` only when no free address could be drawn. `key` is the Machine's `namespace/name`
/// (an address it holds is its own).
pub fn fill(
    networks: &mut [Network],
    old: Option<&Value>,
    key: &str,
    macs: &LiveMacs,
) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    for n in networks.iter_mut().filter(|n| n.mac_address.is_none()) {
        let stored = stored_address(old, &n.name);
        let holder = stored.and_then(|(text, _)| macs.owner(text));
        let choice = choose(stored.is_some(), holder.as_deref(), key);
        if let (Choice::Keep, Some((text, _))) = (&choice, stored) {
            n.mac_address = Some(text.to_owned());
            continue;
        }
        let fresh = macs.allocate().ok_or_else(|| {
            format!(
                "no free MAC address could be drawn for spec.networks[{:?}]",
                n.name
            )
        })?;
        if let (Choice::Taken(other), Some((text, held))) = (choice, stored) {
            let whose = match held.origin {
                Origin::Spec => "its spec had",
                Origin::Reported => "its VM reports",
            };
            warnings.push(format!(
                "spec.networks[{:?}].macAddress: {text}, which {whose}, is held by Machine {other}; given {fresh} instead (the guest gets it at its next restart)",
                n.name
            ));
        }
        n.mac_address = Some(fresh);
    }
    Ok(warnings)
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
            let (owner, origin) = macs.holder(mac).filter(|(o, _)| o != key)?;
            let mut e = FieldError::duplicate(&path.index(i).child("macAddress"), mac);
            e.detail = match origin {
                Origin::Spec => format!("already used by Machine {owner}"),
                // Its spec shows none yet: say where the address is seen.
                Origin::Reported => {
                    format!("already used by Machine {owner} (its VM reports it in status)")
                }
            };
            Some(e)
        })
        .collect())
}

#[cfg(test)]
mod tests;
