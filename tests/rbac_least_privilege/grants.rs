//! What the manifests grant, one (apiGroup, resource, verb) at a time, and which request a
//! grant allows; the grants on the operator's own objects name them.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::Api;
use kube::{Client, ResourceExt};

use crate::support::{AuditedRequest, OPERATOR_NAMESPACE};
use crate::{USER, create, yaml};
use kubevirt_operator::api::names::{MACHINE_CRD, OWNERSHIP_KEY_SECRET};
use kubevirt_operator::certs::{
    BUNDLE_CONFIGMAP, CA_SECRET, SERVING_SECRET, WEBHOOK_CONFIGURATION,
};

/// Grants this control plane cannot exercise, with the reason; each reason is checked below.
pub const EXEMPT: &[(&str, &str, &str, &str)] = &[
    (
        "",
        "configmaps",
        "get",
        "a remote Machine's certConfigMap, read to be copied to its cluster: this walk has no \
         reachable remote cluster; exercised on two control planes in tests/remote_trust_e2e.rs \
         (credentials)",
    ),
    (
        "vitistack.io",
        "machinesnapshots/finalizers",
        "update",
        "needed to set blockOwnerDeletion on owner references to MachineSnapshots (their \
         VirtualMachineSnapshots), which only OwnerReferencesPermissionEnforcement checks",
    ),
    (
        "vitistack.io",
        "machinerestores/finalizers",
        "update",
        "needed to set blockOwnerDeletion on owner references to MachineRestores (their \
         VirtualMachineRestores), which only OwnerReferencesPermissionEnforcement checks",
    ),
    (
        "vitistack.io",
        "machinesnapshots",
        "create",
        "a schedule's snapshot: due at the next cron minute at the soonest, so exercised with a \
         clock moved by hand in tests/snapshot_schedule_e2e.rs instead",
    ),
    (
        "vitistack.io",
        "machinesnapshots",
        "patch",
        "the finalizer of a snapshot taken on a remote cluster: needs a second control plane, \
         exercised in tests/remote_snapshots_e2e.rs",
    ),
    (
        "vitistack.io",
        "machinesnapshots",
        "delete",
        "a schedule's snapshot beyond keep: exercised with a clock moved by hand in \
         tests/snapshot_schedule_e2e.rs",
    ),
    (
        "vitistack.io",
        "machinerestores",
        "get",
        "read fresh to record the uid of a disk a restore made again: exercised past the \
         commit point in tests/restore_trust_e2e.rs (this restore fails before it)",
    ),
    (
        "",
        "pods",
        "create",
        "a restore's consumer Pod for claims of a WaitForFirstConsumer class: exercised in \
         tests/restore_trust_e2e.rs",
    ),
    (
        "",
        "pods",
        "delete",
        "a restore's consumer Pod, once the claims are bound: exercised in \
         tests/restore_trust_e2e.rs",
    ),
    (
        "vitistack.io",
        "machines/finalizers",
        "update",
        "needed to set blockOwnerDeletion on owner references to Machines, which only the \
         OwnerReferencesPermissionEnforcement admission plugin checks (not enabled here)",
    ),
    (
        "vitistack.io",
        "networkconfigurations/finalizers",
        "update",
        "needed to set blockOwnerDeletion on owner references to NetworkConfigurations (the \
         attachments), which only OwnerReferencesPermissionEnforcement checks (not enabled here)",
    ),
];

/// One granted (apiGroup, resource[/subresource], verb), from a Role (namespace) or the
/// ClusterRole (None).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    pub source: &'static str,
    pub namespace: Option<String>,
    pub group: String,
    pub resource: String,
    pub verb: String,
    /// resourceNames; empty: any name.
    pub names: Vec<String>,
}

pub fn grants(source: &'static str, namespace: Option<&str>, rules: &[PolicyRule]) -> Vec<Grant> {
    let mut out = Vec::new();
    for rule in rules {
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        let names = rule.resource_names.clone().unwrap_or_default();
        for g in &groups {
            for r in &resources {
                for v in &rule.verbs {
                    assert!(g != "*" && r != "*" && v != "*", "{source}: wildcard grant");
                    out.push(Grant {
                        source,
                        namespace: namespace.map(str::to_owned),
                        group: g.clone(),
                        resource: r.clone(),
                        verb: v.clone(),
                        names: names.clone(),
                    });
                }
            }
        }
    }
    out
}

pub fn resource_of(r: &AuditedRequest) -> String {
    if r.subresource.is_empty() {
        r.resource.clone()
    } else {
        format!("{}/{}", r.resource, r.subresource)
    }
}

/// The RBAC verbs a request needed: its own, and `create` for a server-side apply that created.
fn verbs_of(r: &AuditedRequest) -> Vec<&str> {
    let mut v = vec![r.verb.as_str()];
    if r.verb == "patch" && r.code == 201 {
        v.push("create");
    }
    v
}

pub fn allows(g: &Grant, r: &AuditedRequest) -> bool {
    g.group == r.api_group
        && g.resource == resource_of(r)
        && verbs_of(r).contains(&g.verb.as_str())
        && g.namespace.as_ref().is_none_or(|ns| *ns == r.namespace)
        && (g.names.is_empty() || g.names.contains(&r.name))
}

/// Scope as well as verbs: in the operator's namespace and on the cluster-scoped webhook
/// configurations, every right but `create` names the objects the operator owns (create cannot
/// be limited by name: the name is in the body).
#[test]
fn grants_on_the_operators_own_objects_name_them() {
    let cluster_role: ClusterRole = yaml("manifests/rbac/cluster_role.yaml");
    let lease_role: Role = yaml("manifests/rbac/leader_election_role.yaml");
    let certs_role: Role = yaml("manifests/rbac/certificates_role.yaml");
    let key_role: Role = yaml("manifests/rbac/ownership_key_role.yaml");
    let kc_role: Role = yaml("manifests/rbac/kubevirt_config_role.yaml");
    let mut checked = 0;
    let named = |g: &Grant, expected: &[&str]| {
        if g.verb == "create" {
            assert!(g.names.is_empty(), "{g:?}");
        } else {
            assert_eq!(
                g.names, expected,
                "{g:?}: limited to the operator's own objects"
            );
        }
    };
    for g in grants(
        "cluster_role.yaml",
        None,
        cluster_role.rules.as_deref().unwrap_or_default(),
    ) {
        if g.group == "admissionregistration.k8s.io" {
            // Issue 24: the manifests install the webhook configurations; the operator only
            // fills their caBundle, so no create (which cannot be limited by name) at all.
            assert_ne!(
                g.verb, "create",
                "{g:?}: the operator creates no webhook configuration"
            );
            named(&g, &[WEBHOOK_CONFIGURATION]);
            checked += 1;
        } else if g.group == "apiextensions.k8s.io" {
            // Read only, and only the Machine CRD (its status schema, at leader start).
            assert_eq!(
                (g.verb.as_str(), g.resource.as_str()),
                ("get", "customresourcedefinitions")
            );
            named(&g, &[MACHINE_CRD]);
            checked += 1;
        } else {
            assert!(g.names.is_empty(), "{g:?}");
        }
    }
    for g in grants(
        "leader_election_role.yaml",
        Some(OPERATOR_NAMESPACE),
        lease_role.rules.as_deref().unwrap_or_default(),
    ) {
        named(&g, &[kubevirt_operator::leader::LEASE_NAME]);
        checked += 1;
    }
    for g in grants(
        "certificates_role.yaml",
        Some(OPERATOR_NAMESPACE),
        certs_role.rules.as_deref().unwrap_or_default(),
    ) {
        match g.resource.as_str() {
            "secrets" => named(&g, &[CA_SECRET, SERVING_SECRET]),
            "configmaps" => named(&g, &[BUNDLE_CONFIGMAP]),
            other => panic!("certificates_role.yaml grants {other}"),
        }
        checked += 1;
    }
    for g in grants(
        "ownership_key_role.yaml",
        Some(OPERATOR_NAMESPACE),
        key_role.rules.as_deref().unwrap_or_default(),
    ) {
        assert_eq!(g.resource, "secrets", "{g:?}");
        named(&g, &[OWNERSHIP_KEY_SECRET]);
        checked += 1;
    }
    // Issue 22: KubevirtConfigs' kubeconfig Secrets. Their names are the KubevirtConfigs', so
    // not in the Role; list and watch only (each config's Secret is watched by a field
    // selector), no get and no write.
    for g in grants(
        "kubevirt_config_role.yaml",
        Some(OPERATOR_NAMESPACE),
        kc_role.rules.as_deref().unwrap_or_default(),
    ) {
        assert_eq!(
            (g.group.as_str(), g.resource.as_str()),
            ("", "secrets"),
            "{g:?}"
        );
        assert!(matches!(g.verb.as_str(), "list" | "watch"), "{g:?}");
        checked += 1;
    }
    // Webhook configurations: 2 kinds x (get, list, watch, update); the Machine CRD: get; the
    // Lease: get, patch, create; Secrets: get, list, watch, update, delete, create; the
    // ConfigMap: 5; the ownership key: get, create; kubeconfig Secrets: list, watch.
    assert_eq!(
        checked,
        8 + 1 + 3 + 6 + 5 + 2 + 2,
        "every grant on the operator's own objects was checked"
    );
}

/// Installs the three manifests and binds them to `USER` (a User subject instead of the
/// ServiceAccount). Returns the grants.
pub async fn bind_manifests(client: &Client) -> Vec<Grant> {
    let cluster_role: ClusterRole = yaml("manifests/rbac/cluster_role.yaml");
    let lease_role: Role = yaml("manifests/rbac/leader_election_role.yaml");
    let certs_role: Role = yaml("manifests/rbac/certificates_role.yaml");
    let key_role: Role = yaml("manifests/rbac/ownership_key_role.yaml");
    let kc_role: Role = yaml("manifests/rbac/kubevirt_config_role.yaml");
    let subject = Subject {
        kind: "User".into(),
        name: USER.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        namespace: None,
    };
    create(&Api::<ClusterRole>::all(client.clone()), &cluster_role).await;
    let mut crb = ClusterRoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: cluster_role.name_any(),
        },
        subjects: Some(vec![subject.clone()]),
        ..Default::default()
    };
    crb.metadata.name = Some(format!("{USER}-cluster"));
    create(&Api::<ClusterRoleBinding>::all(client.clone()), &crb).await;
    let mut out = grants(
        "cluster_role.yaml",
        None,
        cluster_role.rules.as_deref().unwrap_or_default(),
    );
    for (file, role) in [
        ("leader_election_role.yaml", &lease_role),
        ("certificates_role.yaml", &certs_role),
        ("ownership_key_role.yaml", &key_role),
        ("kubevirt_config_role.yaml", &kc_role),
    ] {
        let ns = role.namespace().expect("Roles name their namespace");
        assert_eq!(ns, OPERATOR_NAMESPACE, "{file}");
        create(&Api::<Role>::namespaced(client.clone(), &ns), role).await;
        let mut rb = RoleBinding {
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: role.name_any(),
            },
            subjects: Some(vec![subject.clone()]),
            ..Default::default()
        };
        rb.metadata.name = Some(format!("{USER}-{}", role.name_any()));
        create(&Api::<RoleBinding>::namespaced(client.clone(), &ns), &rb).await;
        out.extend(grants(
            file,
            Some(&ns),
            role.rules.as_deref().unwrap_or_default(),
        ));
    }
    out
}
