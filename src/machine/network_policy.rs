//! What NetworkConfigurations may ask of the nodes. A NetworkConfiguration's bridge and VLAN
//! become a bridge-CNI attachment on every node, so a tenant naming the management bridge or
//! another tenant's VLAN would reach it. Nothing is allowed unless the admin lists it
//! (`--allowed-bridges`, `--allowed-vlans`): the webhook refuses the rest, and the reconciler
//! checks again before it writes an attachment, for what was stored while no webhook ran.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use crate::api::NetworkConfigurationSpec;

use super::field_error::{FieldError, FieldPath};

pub const BRIDGES_SETTING: &str = "--allowed-bridges (ALLOWED_BRIDGES)";
pub const VLANS_SETTING: &str = "--allowed-vlans (ALLOWED_VLANS)";
/// IFNAMSIZ (16) less the terminating NUL.
pub const MAX_INTERFACE_NAME_BYTES: usize = 15;
pub const MAX_VLAN: i64 = 4094;
/// Unset `--allowed-vlans`: untagged traffic only, on whatever bridge is allowed.
pub const DEFAULT_VLANS: &str = "0";

/// The admin's allow-lists. The default allows no bridge, so no network at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkPolicy {
    bridges: BTreeSet<String>,
    vlans: Vlans,
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        NetworkPolicy {
            bridges: BTreeSet::new(),
            vlans: Vlans(vec![0..=0]),
        }
    }
}

/// VLAN IDs as ranges, `0` meaning untagged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vlans(Vec<RangeInclusive<i64>>);

impl Vlans {
    /// Parses `0,100-199,300`: IDs and inclusive ranges of 0-4094, comma-separated.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut ranges = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let id = |v: &str| match v.trim().parse::<i64>() {
                Ok(n) if (0..=MAX_VLAN).contains(&n) => Ok(n),
                _ => Err(format!(
                    "{part:?} is not a VLAN ID (0-{MAX_VLAN}, 0 untagged) or a range such as 100-199"
                )),
            };
            let (a, b) = (id(a)?, id(b)?);
            if a > b {
                return Err(format!("{part:?} is a range whose start is above its end"));
            }
            ranges.push(a..=b);
        }
        if ranges.is_empty() {
            return Err(format!(
                "{s:?} names no VLAN (0 allows untagged traffic only)"
            ));
        }
        Ok(Vlans(ranges))
    }

    pub fn contains(&self, vlan: i64) -> bool {
        self.0.iter().any(|r| r.contains(&vlan))
    }
}

impl std::fmt::Display for Vlans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| match (r.start(), r.end()) {
                (a, b) if a == b => a.to_string(),
                (a, b) => format!("{a}-{b}"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Why Linux would refuse `name` as an interface name (the kernel's `dev_valid_name`), if it would.
pub fn interface_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if name.len() > MAX_INTERFACE_NAME_BYTES {
        return Some(format!(
            "must be at most {MAX_INTERFACE_NAME_BYTES} bytes (a Linux interface name)"
        ));
    }
    if name == "." || name == ".." {
        return Some("must not be \".\" or \"..\"".to_owned());
    }
    if name
        .chars()
        .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace())
    {
        return Some("must not contain '/', ':' or whitespace (a Linux interface name)".to_owned());
    }
    None
}

impl NetworkPolicy {
    pub fn new(bridges: impl IntoIterator<Item = String>, vlans: Vlans) -> Self {
        NetworkPolicy {
            bridges: bridges.into_iter().collect(),
            vlans,
        }
    }

    /// Every problem with a NetworkConfiguration's spec, its static rules and the allow-lists.
    pub fn check(&self, spec: &NetworkConfigurationSpec) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let mut errors = Vec::new();
        let field = path.child("bridge");
        match spec.bridge.as_deref() {
            None => errors.push(FieldError::required(&field, "the host bridge to attach to")),
            Some(bridge) => {
                if let Some(problem) = interface_name_problem(bridge) {
                    errors.push(FieldError::invalid(&field, bridge, problem));
                } else if !self.bridges.contains(bridge) {
                    errors.push(FieldError::not_allowed(
                        &field,
                        bridge,
                        self.bridges_allowed(),
                    ));
                }
            }
        }
        let vlan = spec.vlan.unwrap_or(0);
        let field = path.child("vlan");
        if !(0..=MAX_VLAN).contains(&vlan) {
            errors.push(FieldError::invalid(
                &field,
                vlan,
                format!("must be between 0 and {MAX_VLAN}, inclusive (0: untagged)"),
            ));
        } else if !self.vlans.contains(vlan) {
            errors.push(FieldError::not_allowed(
                &field,
                vlan,
                format!(
                    "the operator's {VLANS_SETTING} allows {} (0: untagged)",
                    self.vlans
                ),
            ));
        }
        errors
    }

    fn bridges_allowed(&self) -> String {
        if self.bridges.is_empty() {
            return format!("the operator's {BRIDGES_SETTING} allows no bridge (unset)");
        }
        let list: Vec<&str> = self.bridges.iter().map(String::as_str).collect();
        format!(
            "the operator's {BRIDGES_SETTING} allows {}",
            list.join(", ")
        )
    }
}

#[cfg(test)]
mod tests;
