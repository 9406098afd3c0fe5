//! NetworkConfiguration admission: `spec.bridge` becomes the `bridge` of a bridge-CNI attachment
//! on every node, so it must be a name Linux accepts for an interface and, when the admin lists
//! the bridges VMs may join (`--allowed-bridges`), one of those; `spec.vlan` is 802.1Q's 0-4094.
//! The static rules are in the CRD schema too; the allow-list needs this webhook.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::api::NetworkConfigurationSpec;
use crate::machine::{FieldError, FieldPath};

use super::Admission;
use super::decide::{bad_request, invalid_kind};
use super::review::{Request, Verdict};

/// IFNAMSIZ (16) less the terminating NUL.
pub const MAX_INTERFACE_NAME_BYTES: usize = 15;
pub const MAX_VLAN: i64 = 4094;

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

/// Every problem with a NetworkConfiguration's spec. `allowed`: the admin's list, if any.
pub fn validate_network(
    spec: &NetworkConfigurationSpec,
    allowed: Option<&BTreeSet<String>>,
) -> Vec<FieldError> {
    let path = FieldPath::new("spec");
    let mut errors = Vec::new();
    if let Some(bridge) = &spec.bridge {
        let field = path.child("bridge");
        if let Some(problem) = interface_name_problem(bridge) {
            errors.push(FieldError::invalid(&field, bridge.as_str(), problem));
        } else if let Some(allowed) = allowed
            && !allowed.contains(bridge)
        {
            let list: Vec<&str> = allowed.iter().map(String::as_str).collect();
            errors.push(FieldError::not_supported(&field, bridge.as_str(), &list));
        }
    }
    if let Some(vlan) = spec.vlan
        && !(0..=MAX_VLAN).contains(&vlan)
    {
        errors.push(FieldError::invalid(
            &path.child("vlan"),
            vlan,
            format!("must be between 0 and {MAX_VLAN}, inclusive (0: untagged)"),
        ));
    }
    errors
}

impl Admission {
    /// The NetworkConfiguration rules on CREATE and on UPDATEs that change the spec (an
    /// unchanged one never blocks metadata updates, even if the allow-list changed since).
    pub fn validate_network(&self, req: &Request) -> Verdict {
        if req.operation != "CREATE" && req.operation != "UPDATE" {
            return Verdict::deny(bad_request(&format!(
                "operation {:?} is not handled: this webhook admits NetworkConfiguration CREATE and UPDATE only",
                req.operation
            )));
        }
        if req.kind.group != "vitistack.io" || req.kind.kind != "NetworkConfiguration" {
            return Verdict::deny(bad_request(&format!(
                "Kind={} is not handled: this webhook admits vitistack.io/v1alpha1, Kind=NetworkConfiguration only",
                req.kind.kind
            )));
        }
        if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
            return Verdict::allow();
        }
        let Some(raw) = &req.object else {
            return Verdict::deny(bad_request("AdmissionReview request has no object"));
        };
        let spec = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
        let new = spec(raw);
        if req.operation == "UPDATE" && req.old_object.as_ref().map(spec) == Some(new.clone()) {
            return Verdict::allow();
        }
        let name = raw
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&req.name);
        let errors = match serde_json::from_value::<Option<NetworkConfigurationSpec>>(new) {
            Ok(spec) => validate_network(&spec.unwrap_or_default(), self.allowed_bridges()),
            Err(e) => vec![FieldError::type_invalid(
                &FieldPath::new("spec"),
                Value::Null,
                e.to_string(),
            )],
        };
        if errors.is_empty() {
            Verdict::allow()
        } else {
            Verdict::deny(invalid_kind("NetworkConfiguration", name, &errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::review::GroupVersionKind;
    use crate::machine::Catalog;

    fn spec(bridge: Option<&str>, vlan: Option<i64>) -> NetworkConfigurationSpec {
        NetworkConfigurationSpec {
            bridge: bridge.map(str::to_owned),
            vlan,
        }
    }

    #[test]
    fn bridge_names_follow_linux_interface_rules() {
        let long16 = "b".repeat(16);
        let cases: &[(&str, bool)] = &[
            ("br0", true),
            ("br-prod.100", true),
            (&long16[..15], true),
            ("", false),
            (&long16, false),
            (".", false),
            ("..", false),
            ("...", true),
            ("br/0", false),
            ("br:0", false),
            ("br 0", false),
            ("br\t0", false),
            ("ø12345", true),
            // 16 bytes in 8 characters: Linux counts bytes.
            ("øøøøøøøø", false),
        ];
        for (name, ok) in cases {
            let errors = validate_network(&spec(Some(name), None), None);
            assert_eq!(errors.is_empty(), *ok, "{name:?}: {errors:?}");
            if !ok {
                assert_eq!(errors[0].field, "spec.bridge");
            }
        }
    }

    #[test]
    fn vlan_is_0_to_4094() {
        for (vlan, ok) in [(0, true), (4094, true), (4095, false), (-1, false)] {
            let errors = validate_network(&spec(Some("br0"), Some(vlan)), None);
            assert_eq!(errors.is_empty(), ok, "{vlan}: {errors:?}");
        }
    }

    #[test]
    fn allow_list_names_spec_bridge_and_the_allowed_values() {
        let allowed: BTreeSet<String> = ["br1".to_owned(), "br0".to_owned()].into();
        assert!(validate_network(&spec(Some("br0"), None), Some(&allowed)).is_empty());
        let errors = validate_network(&spec(Some("br-mgmt"), None), Some(&allowed));
        assert_eq!(
            errors[0].to_string(),
            r#"spec.bridge: Unsupported value: "br-mgmt": supported values: "br0", "br1""#
        );
    }

    fn request(op: &str, object: Value, old: Option<Value>) -> Request {
        Request {
            uid: "u".into(),
            kind: GroupVersionKind {
                group: "vitistack.io".into(),
                version: "v1alpha1".into(),
                kind: "NetworkConfiguration".into(),
            },
            name: "lan".into(),
            operation: op.into(),
            object: Some(object),
            old_object: old,
            ..Default::default()
        }
    }

    #[test]
    fn the_webhook_denies_changed_specs_only() {
        let admission = Admission::new(Catalog::with_default("small").expect("catalog"))
            .expect("admission")
            .with_allowed_bridges(vec!["br0".into()]);
        let nc = |bridge: &str| json!({"metadata": {"name": "lan"}, "spec": {"bridge": bridge}});
        assert!(
            admission
                .validate_network(&request("CREATE", nc("br0"), None))
                .allowed
        );
        let denied = admission.validate_network(&request("CREATE", nc("br-host"), None));
        let message = denied.status.and_then(|s| s.message).unwrap_or_default();
        assert_eq!(
            message,
            r#"NetworkConfiguration.vitistack.io "lan" is invalid: spec.bridge: Unsupported value: "br-host": supported values: "br0""#
        );
        // Stored before the allow-list: metadata updates still pass, spec changes are checked.
        let old = nc("br-host");
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(
            admission
                .validate_network(&request("UPDATE", relabelled, Some(old.clone())))
                .allowed
        );
        assert!(
            !admission
                .validate_network(&request("UPDATE", nc("br9"), Some(old)))
                .allowed
        );
        let typed =
            admission.validate_network(&request("CREATE", json!({"spec": {"vlan": "ten"}}), None));
        assert!(!typed.allowed);
    }
}
