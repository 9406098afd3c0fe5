//! Minted users, namespaces of parallel tests, the audit log.

use crate::support::ControlPlane;
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use std::time::{Duration, Instant};

async fn eventually_ok<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    // RBAC changes reach the authorizer through an informer: allow a moment.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match f().await {
            Ok(value) => return value,
            Err(e) if Instant::now() > deadline => panic!("{what}: still failing after 15s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test]
async fn minted_user_is_forbidden_until_rbac_grants_access() {
    let cp = ControlPlane::shared()
        .await
        .expect("shared control plane starts");
    let ns = cp.namespace("rbac").await.expect("namespace");
    let user_name = format!("alice-{ns}");
    let user = cp
        .mint_user(&user_name, &["team-a", "team-b"])
        .expect("mint a client certificate");
    let alice: Client = cp
        .client_for(&user)
        .await
        .expect("client for the minted user");
    let admin = cp.client().await.expect("admin client");

    let configmaps: Api<ConfigMap> = Api::namespaced(alice.clone(), &ns);
    let status = api_error(
        configmaps
            .list(&ListParams::default())
            .await
            .expect_err("no RBAC yet"),
    );
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains(&user_name),
        "403 names the user: {}",
        status.message
    );

    // One Role per resource, bound to the user, the first group and the second group: each
    // binding must take effect on its own, proving the CN and both O values authenticate.
    for (resource, kind, subject) in [
        ("configmaps", "User", user_name.as_str()),
        ("secrets", "Group", "team-a"),
        ("pods", "Group", "team-b"),
    ] {
        let role: Role = serde_json::from_value(json!({
            "metadata": { "name": format!("read-{resource}") },
            "rules": [{ "apiGroups": [""], "resources": [resource], "verbs": ["get", "list"] }],
        }))
        .expect("Role");
        Api::<Role>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &role)
            .await
            .expect("create Role");
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": { "name": format!("read-{resource}") },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("read-{resource}") },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject }],
        }))
        .expect("RoleBinding");
        Api::<RoleBinding>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &binding)
            .await
            .expect("create RoleBinding");
    }
    let secrets: Api<Secret> = Api::namespaced(alice.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(alice.clone(), &ns);
    let lp = ListParams::default();
    eventually_ok("list configmaps (bound to the user)", || {
        configmaps.list(&lp)
    })
    .await;
    eventually_ok("list secrets (bound to the first group)", || {
        secrets.list(&lp)
    })
    .await;
    eventually_ok("list pods (bound to the second group)", || pods.list(&lp)).await;

    // The grant is namespaced: other namespaces stay forbidden.
    let elsewhere: Api<ConfigMap> = Api::namespaced(alice, "default");
    let status = api_error(
        elsewhere
            .list(&ListParams::default())
            .await
            .expect_err("no RBAC in default"),
    );
    assert_eq!(status.code, 403, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_instance_gives_parallel_tests_distinct_namespaces() {
    let cp = ControlPlane::shared()
        .await
        .expect("shared control plane starts");
    let again = ControlPlane::shared().await.expect("shared control plane");
    assert!(
        std::ptr::eq(cp, again),
        "shared() must return the one instance"
    );

    let tasks: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move {
                let cp = ControlPlane::shared().await.expect("shared control plane");
                let ns = cp.namespace("parallel").await.expect("namespace");
                let cms: Api<ConfigMap> = Api::namespaced(cp.client().await.expect("client"), &ns);
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": { "name": "marker" }, "data": { "task": i.to_string() },
                }))
                .expect("ConfigMap");
                cms.create(&PostParams::default(), &cm)
                    .await
                    .expect("create marker");
                (ns, i)
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(task.await.expect("task"));
    }
    let mut names: Vec<&str> = seen.iter().map(|(ns, _)| ns.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 8, "namespaces must be distinct: {seen:?}");

    // Each namespace holds exactly its own task's object.
    let client = cp.client().await.expect("client");
    for (ns, i) in &seen {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let list = cms.list(&ListParams::default()).await.expect("list");
        let tasks: Vec<_> = list
            .items
            .iter()
            .filter_map(|cm| cm.data.as_ref()?.get("task").cloned())
            .collect();
        assert_eq!(tasks, vec![i.to_string()], "namespace {ns}");
    }
}

#[tokio::test]
async fn the_audit_log_names_each_callers_requests() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.namespace("audit").await.expect("namespace");
    let user = cp.mint_user("audited-user", &[]).expect("user");
    let client = cp.client_for(&user).await.expect("client");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, &ns);
    let denied = pods
        .list(&Default::default())
        .await
        .expect_err("no RBAC yet");
    assert!(format!("{denied}").contains("forbidden"), "{denied}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = cp
            .audited_requests()
            .expect("audit log")
            .into_iter()
            .any(|r| {
                r.user == "audited-user"
                    && r.verb == "list"
                    && r.resource == "pods"
                    && r.namespace == ns
                    && r.code == 403
            });
        if seen {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the denied list never reached the audit log"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
