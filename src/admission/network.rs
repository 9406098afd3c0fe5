//! NetworkConfiguration admission: `spec.bridge` and `spec.vlan` become a bridge-CNI attachment
//! on every node, so they must be what the admin allows (`crate::machine::network_policy`). The
//! static rules are in the CRD schema too; the allow-lists need this webhook.

use serde_json::Value;

use crate::addresses::Pool;
use crate::api::NetworkConfigurationSpec;
use crate::machine::{FieldError, FieldPath};

use super::Admission;
use super::decide::{bad_request, invalid_kind};
use super::review::{Request, Verdict};

pub use crate::machine::network_policy::interface_name_problem;

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
            Ok(spec) => {
                let spec = spec.unwrap_or_default();
                let mut errors = self.catalog().networks().check(&spec);
                if let Some(ipam) = &spec.ipam {
                    let path = FieldPath::new("spec");
                    let path = path.child("ipam");
                    errors.extend(Pool::check(ipam, &path).err().unwrap_or_default());
                }
                errors
            }
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
    use crate::machine::network_policy::{NetworkPolicy, Vlans};

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
        let policy = NetworkPolicy::new(["br0".to_owned()], Vlans::parse("0").expect("vlans"));
        let catalog = Catalog::with_default("small")
            .expect("catalog")
            .with_networks(policy);
        let admission = Admission::new(catalog).expect("admission");
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
            r#"NetworkConfiguration.vitistack.io "lan" is invalid: spec.bridge: Unsupported value: "br-host": the operator's --allowed-bridges (ALLOWED_BRIDGES) allows br0"#
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
