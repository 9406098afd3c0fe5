//! Which machine types the VM may get: KubeVirt refuses a VM whose machine type matches none of
//! its `emulatedMachines` (by default `q35*`, `pc-q35*`), so the operator admits only what the
//! admin says KubeVirt allows (`--allowed-machine-types`), matched against the name it writes to
//! KubeVirt, and the user hears of it at admission instead of from a VM that never appears.

use std::sync::Arc;

pub const DEFAULT_MACHINE_TYPE: &str = "pc-q35";

use crate::api::MachineSpec;

use super::field_error::{FieldError, FieldPath};

/// KubeVirt's default `architectureConfiguration.amd64.emulatedMachines`.
pub const KUBEVIRT_DEFAULT: &[&str] = &["q35*", "pc-q35*"];
pub const SETTING: &str = "--allowed-machine-types (ALLOWED_MACHINE_TYPES)";

/// The glob patterns machine types must match, as KubeVirt matches them (`*` and `?`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineTypes(Arc<[String]>);

impl Default for MachineTypes {
    fn default() -> Self {
        MachineTypes(KUBEVIRT_DEFAULT.iter().map(|p| (*p).to_owned()).collect())
    }
}

impl MachineTypes {
    /// Parses `q35*,pc-q35*`: comma-separated patterns of letters, digits, `.`, `_`, `-`, `*`, `?`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut patterns = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let ok = p.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'*' | b'?')
            });
            if !ok {
                return Err(format!(
                    "{p:?} is not a machine type pattern (letters, digits, '.', '_', '-', '*', '?')"
                ));
            }
            if !patterns.iter().any(|q: &String| q == p) {
                patterns.push(p.to_owned());
            }
        }
        if patterns.is_empty() {
            return Err(format!("{s:?} names no machine type pattern"));
        }
        Ok(MachineTypes(patterns.into()))
    }

    pub fn patterns(&self) -> &[String] {
        &self.0
    }

    /// Whether KubeVirt, configured like this, accepts `kubevirt_name`.
    pub fn allows(&self, kubevirt_name: &str) -> bool {
        self.0
            .iter()
            .any(|p| glob(p.as_bytes(), kubevirt_name.as_bytes()))
    }

    /// The error for a Machine whose machine type (as the Machine spells it) is not allowed.
    pub fn problem(&self, path: &FieldPath, machine_type: &str) -> Option<FieldError> {
        let written = kubevirt_name(machine_type);
        if self.allows(written) {
            return None;
        }
        let mut why = format!("the operator's {SETTING} allows {}", self.0.join(", "));
        if *self == MachineTypes::default() {
            why.push_str(", as KubeVirt's default configuration does");
        }
        if written != machine_type {
            why.push_str(&format!(" (KubeVirt gets {written:?})"));
        }
        Some(FieldError::not_allowed(path, machine_type, why))
    }
}

/// The spelling a Machine may use, whatever KubeVirt allows.
const SPELLINGS: &[&str] = &[
    "pc-q35",
    "pc-q35-<version>",
    "pc-i440fx",
    "pc-i440fx-<version>",
];

fn is_spelled_right(t: &str) -> bool {
    ["pc-q35", "pc-i440fx"].iter().any(|base| {
        t == *base
            || t.strip_prefix(base)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|version| {
                    !version.is_empty()
                        && version
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
                })
    })
}

/// `spec.domain.machine.type`'s errors: a spelling we know, then one `allowed` accepts as the VM
/// gets it, the default type included (a KubeVirt configured without q35 refuses that too).
pub fn machine_type_errors(spec: &MachineSpec, allowed: &MachineTypes) -> Vec<FieldError> {
    let spec_path = FieldPath::new("spec");
    let domain_path = spec_path.child("domain");
    let machine_path = domain_path.child("machine");
    let path = machine_path.child("type");
    let set = spec
        .domain
        .as_ref()
        .and_then(|d| d.machine.as_ref())
        .and_then(|m| m.type_.as_deref());
    let machine_type = set.unwrap_or(DEFAULT_MACHINE_TYPE);
    if !is_spelled_right(machine_type) {
        return vec![FieldError::not_supported(&path, machine_type, SPELLINGS)];
    }
    allowed.problem(&path, machine_type).into_iter().collect()
}

/// The name the operator writes to KubeVirt: `pc-q35` and `pc-i440fx` are QEMU's aliases `q35`
/// and `pc`; versioned names pass through.
pub fn kubevirt_name(machine_type: &str) -> &str {
    match machine_type {
        "pc-q35" => "q35",
        "pc-i440fx" => "pc",
        other => other,
    }
}

/// Go's `filepath.Match` for names without separators or classes: `*` any run, `?` one byte.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some((b'?', rest)) => !s.is_empty() && glob(rest, &s[1..]),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubevirts_default_allows_q35_only() {
        let d = MachineTypes::default();
        let cases = [
            ("pc-q35", true),
            ("pc-q35-rhel9.2.0", true),
            ("pc-q35-8.2", true),
            ("pc-i440fx", false),
            ("pc-i440fx-2.12", false),
        ];
        let p = FieldPath::new("spec.domain.machine.type");
        for (t, ok) in cases {
            assert_eq!(d.problem(&p, t).is_none(), ok, "{t}");
        }
        assert_eq!(
            d.problem(&p, "pc-i440fx")
                .map(|e| e.to_string())
                .unwrap_or_default(),
            r#"spec.domain.machine.type: Unsupported value: "pc-i440fx": the operator's --allowed-machine-types (ALLOWED_MACHINE_TYPES) allows q35*, pc-q35*, as KubeVirt's default configuration does (KubeVirt gets "pc")"#
        );
    }

    #[test]
    fn patterns_are_globs_over_what_kubevirt_gets() {
        let m = MachineTypes::parse("pc, pc-i440fx-*,q35").expect("parses");
        assert_eq!(m.patterns(), ["pc", "pc-i440fx-*", "q35"]);
        assert!(m.allows(kubevirt_name("pc-i440fx")));
        assert!(m.allows("pc-i440fx-2.12"));
        assert!(m.allows(kubevirt_name("pc-q35")));
        assert!(!m.allows("pc-q35-8.2"));
        assert!(
            MachineTypes::parse("pc-q35-?.?")
                .expect("parses")
                .allows("pc-q35-8.2")
        );
        let p = FieldPath::new("t");
        let e = m.problem(&p, "pc-q35-8.2").map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                r#"t: Unsupported value: "pc-q35-8.2": the operator's --allowed-machine-types (ALLOWED_MACHINE_TYPES) allows pc, pc-i440fx-*, q35"#
            )
        );
    }

    #[test]
    fn bad_settings_are_refused() {
        for bad in ["", " , ", "q35[0-9]", "q35 *", "pc/q35"] {
            assert!(MachineTypes::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            MachineTypes::parse("q35*,pc-q35*").expect("parses"),
            MachineTypes::default()
        );
    }
}
