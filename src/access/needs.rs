//! Which permissions a Machine write needs from its author: a pure function of (old, new).
//!
//! Each kind of reference the operator follows on the author's behalf is one function in
//! [`SOURCES`]; a new source (CDI `datavolumes/source`, ConfigMaps) adds a function there.

use serde_json::Value;

use super::Permission;

/// A Machine write as the access check sees it: the objects as the API server sent them
/// (after mutation), and the namespace they live in.
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    pub namespace: &'a str,
    /// The stored object on UPDATE; `None` on CREATE.
    pub old: Option<&'a Value>,
    pub new: &'a Value,
}

impl Change<'_> {
    /// The value at `pointer` in the new object, when CREATE sets it or UPDATE changes it: an
    /// unchanged reference was checked when it was set and is not re-checked.
    pub fn set_or_changed(&self, pointer: &str) -> Option<&Value> {
        let new = self.new.pointer(pointer).filter(|v| !v.is_null())?;
        match self.old {
            Some(old) if old.pointer(pointer) == Some(new) => None,
            _ => Some(new),
        }
    }
}

/// The references a Machine can carry, each yielding the permissions it needs.
pub const SOURCES: &[fn(&Change) -> Vec<Permission>] = &[cloud_init_secret];

/// Every permission the change needs from its author, in field order.
pub fn machine_needs(change: &Change) -> Vec<Permission> {
    SOURCES.iter().flat_map(|source| source(change)).collect()
}

/// `spec.cloudInit.secretRef`: the operator reads that Secret and hands its data to the guest,
/// so the author must be able to `get` it. Name or key changed: checked again.
fn cloud_init_secret(change: &Change) -> Vec<Permission> {
    let Some(reference) = change.set_or_changed("/spec/cloudInit/secretRef") else {
        return Vec::new();
    };
    let Some(name) = reference.get("name").and_then(Value::as_str) else {
        return Vec::new();
    };
    if name.is_empty() {
        // Refused by validation as a required field; nothing to read.
        return Vec::new();
    }
    vec![Permission {
        field: "spec.cloudInit.secretRef.name".to_owned(),
        verb: "get".to_owned(),
        group: String::new(),
        resource: "secrets".to_owned(),
        subresource: String::new(),
        namespace: change.namespace.to_owned(),
        name: name.to_owned(),
    }]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with_ref(name: &str, key: Option<&str>) -> Value {
        let mut r = json!({"name": name});
        if let Some(k) = key {
            r["key"] = json!(k);
        }
        json!({"metadata": {"name": "m"}, "spec": {"cloudInit": {"secretRef": r}}})
    }

    /// (verb, resource, namespace/name)
    type Needed = Vec<(String, String, String)>;

    fn needed(old: Option<&Value>, new: &Value) -> Needed {
        machine_needs(&Change {
            namespace: "team-a",
            old,
            new,
        })
        .into_iter()
        .map(|p| (p.resource_path(), p))
        .map(|(r, p)| (p.verb, r, format!("{}/{}", p.namespace, p.name)))
        .collect()
    }

    #[test]
    fn secret_ref_needs_get_on_create_and_on_changed_updates_only() {
        let boot = with_ref("boot", None);
        let get_boot = vec![("get".into(), "secrets".into(), "team-a/boot".into())];
        let none = json!({"spec": {"cpu": {"cores": 2}}});
        let cases: &[(&str, Option<&Value>, &Value, Needed)] = &[
            ("create with a reference", None, &boot, get_boot.clone()),
            ("create without", None, &none, vec![]),
            ("update, reference unchanged", Some(&boot), &boot, vec![]),
            (
                "update, other Secret",
                Some(&boot),
                &with_ref("other", None),
                vec![("get".into(), "secrets".into(), "team-a/other".into())],
            ),
            (
                "update, other key",
                Some(&boot),
                &with_ref("boot", Some("cfg")),
                get_boot.clone(),
            ),
            (
                "update, reference added",
                Some(&none),
                &boot,
                get_boot.clone(),
            ),
            ("update, reference removed", Some(&boot), &none, vec![]),
            (
                "empty name (validation refuses it)",
                None,
                &with_ref("", None),
                vec![],
            ),
        ];
        for (what, old, new, want) in cases {
            assert_eq!(&needed(*old, new), want, "{what}");
        }
    }

    #[test]
    fn denial_names_verb_resource_and_namespace_only() {
        let p = &machine_needs(&Change {
            namespace: "team-a",
            old: None,
            new: &with_ref("db-password", Some("k")),
        })[0];
        let text = super::super::Denial {
            user: "bob",
            permission: p,
        }
        .to_string();
        assert_eq!(
            text,
            r#"user "bob" cannot get secrets in namespace "team-a""#
        );
        assert!(!text.contains("db-password"));
        let cdi = Permission {
            group: "cdi.kubevirt.io".into(),
            resource: "datavolumes".into(),
            subresource: "source".into(),
            verb: "create".into(),
            ..p.clone()
        };
        assert_eq!(
            super::super::Denial {
                user: "bob",
                permission: &cdi
            }
            .to_string(),
            r#"user "bob" cannot create datavolumes/source.cdi.kubevirt.io in namespace "team-a""#
        );
    }
}
