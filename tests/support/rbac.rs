//! Rights for a test's users: a Role (or ClusterRole) per user, bound to it.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::Client;
use kube::api::{Api, PostParams};

/// A Role in `ns` with `rules`, bound to `user`, both named after the user.
pub async fn grant(admin: &Client, ns: &str, user: &str, rules: Vec<PolicyRule>) {
    grant_role(admin, ns, user, user, rules).await;
}

/// A Role `role` in `ns` with `rules`, bound to `user` (a user may hold several).
pub async fn grant_role(admin: &Client, ns: &str, role: &str, user: &str, rules: Vec<PolicyRule>) {
    let mut r = Role {
        rules: Some(rules),
        ..Default::default()
    };
    r.metadata.name = Some(role.into());
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &r)
        .await
        .expect("role");
    let mut rb = RoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: role.into(),
        },
        subjects: Some(vec![user_subject(user)]),
        ..Default::default()
    };
    rb.metadata.name = Some(if role == user {
        user.to_owned()
    } else {
        format!("{role}-{user}")
    });
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await
        .expect("role binding");
}

pub fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..Default::default()
    }
}

/// A ClusterRole `user` with `rules`, bound to `user`.
pub async fn grant_cluster(admin: &Client, user: &str, rules: Vec<PolicyRule>) {
    grant_cluster_role(admin, user, user, rules).await;
}

/// A ClusterRole `role` with `rules`, bound to `user` by a binding of the same name.
pub async fn grant_cluster_role(admin: &Client, role: &str, user: &str, rules: Vec<PolicyRule>) {
    let mut r = ClusterRole {
        rules: Some(rules),
        ..Default::default()
    };
    r.metadata.name = Some(role.into());
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &r)
        .await
        .expect("cluster role");
    let mut binding = ClusterRoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![user_subject(user)]),
        ..Default::default()
    };
    binding.metadata.name = Some(role.into());
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("cluster role binding");
}

fn user_subject(user: &str) -> Subject {
    Subject {
        kind: "User".into(),
        name: user.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        namespace: None,
    }
}
