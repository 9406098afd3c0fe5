//! Issue 22, remote clusters through KubevirtConfig, on two real control planes: the management
//! one holds the CRDs, the KubevirtConfigs and their kubeconfig Secrets; the remote one has
//! KubeVirt's and CDI's CRDs (not Multus'). `clusters::run` runs in-process with a 1 s probe
//! interval, so the test reads both the status it writes and the [`Registry`] the reconciler
//! reads: each bad Secret's reason, a rotation from refused credentials to good ones without a
//! restart, the remote API server stopped and started again, and a deleted KubevirtConfig
//! leaving the registry. Also: `manifests/remote-cluster-rbac.yaml` grants its ServiceAccount
//! exactly what docs/user/remote-clusters.md says, checked with SubjectAccessReviews on a control plane.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use kubevirt_operator::api::KubevirtConfig;
use kubevirt_operator::api::kubevirt_config::KubevirtConfigStatus;
use kubevirt_operator::clusters::{self, Apis, Health, Reason, Registry, Settings};
use support::{ControlPlane, Fixture, OPERATOR_NAMESPACE, eventually};

const WAIT: Duration = Duration::from_secs(20);

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A kubeconfig for `server` with a bearer token (the API server refuses an unknown one: 401).
fn token_kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: r, cluster: {{server: '{server}', certificate-authority-data: {ca}}}}}]\nusers: [{{name: u, user: {{token: {token}}}}}]\ncontexts: [{{name: r, context: {{cluster: r, user: u}}}}]\ncurrent-context: r\n"
    )
}

async fn secret(client: &Client, name: &str, key: &str, value: &str) {
    let s: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
        "stringData": {key: value}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), OPERATOR_NAMESPACE)
        .create(&PostParams::default(), &s)
        .await
        .unwrap_or_else(|e| panic!("secret {name}: {e}"));
}

async fn config(configs: &Api<KubevirtConfig>, name: &str, secret: &str) {
    config_in(configs, name, secret, OPERATOR_NAMESPACE).await;
}

async fn config_in(configs: &Api<KubevirtConfig>, name: &str, secret: &str, namespace: &str) {
    let c: KubevirtConfig = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": {"name": name},
        "spec": {"kubeconfigSecretRef": secret, "secretNamespace": namespace}
    }))
    .expect("config");
    configs
        .create(&PostParams::default(), &c)
        .await
        .unwrap_or_else(|e| panic!("KubevirtConfig {name}: {e}"));
}

/// Waits until `name`'s status says `reason` and the registry agrees; returns the status.
async fn reason_is(
    configs: &Api<KubevirtConfig>,
    registry: &Registry,
    name: &str,
    reason: Reason,
) -> KubevirtConfigStatus {
    eventually(WAIT, &format!("{name}: {reason}"), || async {
        let status = configs.get(name).await.ok()?.status?;
        let in_registry = registry.get(name).map(|h| h.reason());
        (status.reason.as_deref() == Some(reason.as_str()) && in_registry == Some(reason))
            .then_some(status)
    })
    .await
}

/// A user on the management cluster holding exactly the operator's KubevirtConfig rules of
/// `manifests/rbac/cluster_role.yaml` and `manifests/rbac/kubevirt_config_role.yaml` (the
/// kubeconfig Secrets in the operator's namespace only).
async fn least_privileged(cp: &ControlPlane, admin: &Client) -> Client {
    const USER: &str = "clusters-controller";
    let read = |path: &str| std::fs::read_to_string(repo(path)).expect(path);
    let mut cluster_role: ClusterRole =
        serde_yaml::from_str(&read("manifests/rbac/cluster_role.yaml")).expect("ClusterRole");
    cluster_role.rules = Some(
        cluster_role
            .rules
            .unwrap_or_default()
            .into_iter()
            .filter(|r| {
                r.resources
                    .iter()
                    .flatten()
                    .any(|res| res.starts_with("kubevirtconfigs"))
            })
            .collect(),
    );
    assert_eq!(
        cluster_role.rules.as_ref().map(Vec::len),
        Some(2),
        "{cluster_role:?}"
    );
    let role: Role =
        serde_yaml::from_str(&read("manifests/rbac/kubevirt_config_role.yaml")).expect("Role");
    let subject = json!([{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]);
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &cluster_role)
        .await
        .expect("ClusterRole");
    Api::<Role>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
        .create(&PostParams::default(), &role)
        .await
        .expect("Role");
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": USER}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": cluster_role.name_any()}
    }))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &crb)
        .await
        .expect("ClusterRoleBinding");
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": USER}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": role.name_any()}
    }))
    .expect("binding");
    Api::<RoleBinding>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
        .create(&PostParams::default(), &rb)
        .await
        .expect("RoleBinding");
    let user = cp.mint_user(USER, &[]).expect("user");
    cp.client_for(&user).await.expect("client")
}

fn ready(registry: &Registry, name: &str) -> Arc<clusters::Connection> {
    match registry.get(name) {
        Some(Health::Ready(c)) => c,
        other => panic!("{name} not ready in the registry: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubevirt_configs_are_probed_rotated_and_forgotten() {
    let started = Instant::now();
    // Ours on the management cluster, KubeVirt's and CDI's on the remote one.
    let theirs = [
        repo("tests/fixtures/crds/virtualmachines.kubevirt.io.yaml"),
        repo("tests/fixtures/crds/datavolumes.cdi.kubevirt.io.yaml"),
    ];
    let (management, mut remote) = tokio::join!(
        Fixture::new().with_machine_crds().start(),
        Fixture::new().with_crds(theirs).start()
    );
    let admin = management.admin_client().await;
    let configs: Api<KubevirtConfig> = Api::all(admin.clone());

    // Five configs: no Secret, no key, garbage, credentials the remote refuses (401), a user
    // the remote knows but gives no rights (403).
    secret(&admin, "no-key", "config", "x").await;
    secret(&admin, "garbage", "kubeconfig", "clusters: [unclosed").await;
    let refused = token_kubeconfig(remote.server_url(), remote.ca_pem(), "not-a-token");
    secret(&admin, "dc1-kubeconfig", "kubeconfig", &refused).await;
    let nobody = remote.mint_user("nobody", &[]).expect("user");
    let nobody = remote.kubeconfig_yaml(&nobody, None).expect("kubeconfig");
    secret(&admin, "no-rights", "kubeconfig", &nobody).await;
    // The schema refuses a missing namespace and names that are no DNS names.
    for (spec, field) in [
        (json!({"kubeconfigSecretRef": "s"}), "spec.secretNamespace"),
        (
            json!({"kubeconfigSecretRef": "Bad_Name", "secretNamespace": "ops"}),
            "spec.kubeconfigSecretRef",
        ),
        (
            json!({"kubeconfigSecretRef": "s", "secretNamespace": "a.b"}),
            "spec.secretNamespace",
        ),
    ] {
        let bad: KubevirtConfig = serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
            "metadata": {"name": "bad"}, "spec": spec
        }))
        .expect("object");
        let raw = Api::<kube::api::DynamicObject>::all_with(
            admin.clone(),
            &kube::api::ApiResource::erase::<KubevirtConfig>(&()),
        );
        let mut value = serde_json::to_value(&bad).expect("json");
        value["spec"] = spec.clone();
        let obj: kube::api::DynamicObject = serde_json::from_value(value).expect("dynamic");
        let refused = raw
            .create(&PostParams::default(), &obj)
            .await
            .expect_err("refused by the schema")
            .to_string();
        assert!(refused.contains(field), "{refused}");
    }

    // A Secret in a namespace the operator was given no Role in.
    config_in(&configs, "elsewhere", "dc1-kubeconfig", "default").await;
    for (name, secret) in [
        ("ghost", "missing"),
        ("nokey", "no-key"),
        ("garbage", "garbage"),
        ("dc1", "dc1-kubeconfig"),
        ("norights", "no-rights"),
    ] {
        config(&configs, name, secret).await;
    }

    let registry = Registry::new();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // The controller runs with the operator's rules only, so nothing it needs is missing from
    // the manifests (and a Secret elsewhere is forbidden).
    let controller = tokio::spawn(clusters::run(
        least_privileged(&management, &admin).await,
        Settings::new(Duration::from_secs(1)),
        registry.clone(),
        Arc::new(|name: &str| if name == "dc1" { 2 } else { 0 }),
        async move {
            let _ = stopped.await;
        },
    ));

    let s = reason_is(&configs, &registry, "ghost", Reason::SecretNotFound).await;
    assert_eq!(s.phase.as_deref(), Some("NotReady"));
    assert!(
        s.message
            .as_deref()
            .unwrap_or_default()
            .contains("Secret kubevirt-operator-system/missing not found"),
        "{s:?}"
    );
    assert_eq!(
        (
            s.conditions[0].type_.as_str(),
            s.conditions[0].status.as_str(),
            s.conditions[0].reason.as_str()
        ),
        ("Ready", "False", "SecretNotFound")
    );
    let s = reason_is(&configs, &registry, "elsewhere", Reason::SecretForbidden).await;
    assert!(
        s.message
            .unwrap_or_default()
            .contains("may not read Secrets in namespace default"),
        "names the namespace"
    );
    let s = reason_is(&configs, &registry, "nokey", Reason::KeyMissing).await;
    assert!(
        s.message
            .unwrap_or_default()
            .contains("no key \"kubeconfig\" (keys: config)")
    );
    let s = reason_is(&configs, &registry, "garbage", Reason::KubeconfigInvalid).await;
    assert!(
        s.message
            .unwrap_or_default()
            .contains("failed to parse kubeconfig YAML"),
        "names the parse error"
    );
    let s = reason_is(&configs, &registry, "dc1", Reason::Unauthorized).await;
    assert!(s.message.unwrap_or_default().contains("(401)"));
    assert_eq!(s.machines, Some(2));
    let s = reason_is(&configs, &registry, "norights", Reason::Unauthorized).await;
    assert!(s.message.unwrap_or_default().contains("(403)"));
    match registry.get("dc1") {
        Some(Health::NotReady { last: None, .. }) => {}
        other => panic!("never ready, so no last connection: {other:?}"),
    }

    // Rotation: dc1's Secret gets a kubeconfig the remote accepts; no restart.
    let good = remote
        .kubeconfig_yaml(remote.admin(), None)
        .expect("admin kubeconfig");
    Api::<Secret>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
        .patch(
            "dc1-kubeconfig",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"kubeconfig": good}})),
        )
        .await
        .expect("rotate");
    let s = reason_is(&configs, &registry, "dc1", Reason::Ready).await;
    assert_eq!(s.phase.as_deref(), Some("Ready"));
    assert_eq!(
        (s.kubevirt_installed, s.cdi_installed, s.multus_installed),
        (Some(true), Some(true), Some(false))
    );
    assert!(
        s.message
            .unwrap_or_default()
            .contains("serves KubeVirt, CDI; not Multus"),
        "names what is served"
    );
    assert!(s.last_checked.is_some());
    let dc1 = ready(&registry, "dc1");
    assert_eq!(
        dc1.apis,
        Apis {
            kubevirt: true,
            cdi: true,
            multus: false
        }
    );
    assert!(!dc1.allow_cross_namespace_clones);
    // The client reaches the remote cluster, not the management one.
    let remote_admin = remote.client().await.expect("remote client");
    let marker: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "only-on-remote"}})).expect("ns");
    Api::<Namespace>::all(remote_admin)
        .create(&PostParams::default(), &marker)
        .await
        .expect("marker namespace");
    let seen: Vec<String> = Api::<Namespace>::all(dc1.client.clone())
        .list(&ListParams::default())
        .await
        .expect("the registry's client lists the remote's namespaces")
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert!(seen.contains(&"only-on-remote".to_owned()), "{seen:?}");

    // Converged: probes every second, but no status write (lastChecked is refreshed alone only
    // every 5 minutes).
    let rv = configs.get("dc1").await.expect("dc1").resource_version();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        configs.get("dc1").await.expect("dc1").resource_version(),
        rv,
        "no status write while nothing changes"
    );

    // The remote API server goes: Unreachable, the last good connection kept for readers.
    remote.stop_apiserver().expect("stop the remote API server");
    let s = reason_is(&configs, &registry, "dc1", Reason::Unreachable).await;
    assert_eq!(s.phase.as_deref(), Some("NotReady"));
    assert!(
        s.message.unwrap_or_default().contains(remote.server_url()),
        "names the server"
    );
    assert_eq!(s.kubevirt_installed, Some(true), "the last known APIs stay");
    match registry.get("dc1") {
        Some(Health::NotReady {
            reason: Reason::Unreachable,
            last: Some(last),
            ..
        }) => assert_eq!(last.revision, dc1.revision),
        other => panic!("{other:?}"),
    }
    remote
        .start_apiserver()
        .await
        .expect("start the remote API server");
    reason_is(&configs, &registry, "dc1", Reason::Ready).await;
    assert_eq!(
        ready(&registry, "dc1").revision,
        dc1.revision,
        "the same kubeconfig"
    );

    // Another rotation while ready: a new revision, hence a new client for readers.
    let other = remote
        .mint_user("operator-2", &["system:masters"])
        .expect("user");
    let other = remote.kubeconfig_yaml(&other, None).expect("kubeconfig");
    Api::<Secret>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
        .patch(
            "dc1-kubeconfig",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"kubeconfig": other}})),
        )
        .await
        .expect("rotate again");
    let rotated = eventually(WAIT, "a new revision of dc1", || async {
        let c = registry.get("dc1")?.ready()?.clone();
        (c.revision != dc1.revision).then_some(c)
    })
    .await;
    assert_eq!(rotated.apis, dc1.apis);

    // Deleted: gone from the registry (its client dropped with it).
    configs
        .delete("dc1", &DeleteParams::default())
        .await
        .expect("delete dc1");
    eventually(WAIT, "dc1 to leave the registry", || async {
        registry.get("dc1").is_none().then_some(())
    })
    .await;
    assert!(registry.get("ghost").is_some(), "the others stay");

    // Stopped (leadership lost): the registry holds no clients.
    stop.send(()).expect("stop");
    tokio::time::timeout(Duration::from_secs(5), controller)
        .await
        .expect("the controller stops")
        .expect("join");
    assert!(registry.subscribe().borrow().is_empty());
    eprintln!("clusters e2e took {:?}", started.elapsed());
}

/// `manifests/remote-cluster-rbac.yaml`, applied with kubectl: its ServiceAccount may do what
/// docs/user/remote-clusters.md's "RBAC on each remote cluster" lists, and not more (no node deletion, no Secret listing, no
/// clone from a namespace it was not bound in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_rbac_manifest_grants_what_the_operator_needs() {
    let cp = Fixture::new().start().await;
    let out = cp
        .kubectl()
        .expect("kubectl")
        .args(["apply", "-f"])
        .arg(repo("manifests/remote-cluster-rbac.yaml"))
        .output()
        .expect("kubectl apply");
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let admin = cp.client().await.expect("client");
    let reviews: Api<SubjectAccessReview> = Api::all(admin);
    let may = |group: &str, resource: &str, verb: &str, ns: Option<&str>| {
        let (group, resource, verb) = (group.to_owned(), resource.to_owned(), verb.to_owned());
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
            None => (resource, None),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(
                    "system:serviceaccount:kubevirt-operator-remote:kubevirt-operator".into(),
                ),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    "system:serviceaccounts:kubevirt-operator-remote".into(),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(group),
                    resource: Some(resource),
                    subresource,
                    verb: Some(verb),
                    namespace: ns.map(str::to_owned),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviews = reviews.clone();
        async move {
            reviews
                .create(&PostParams::default(), &review)
                .await
                .expect("SubjectAccessReview")
                .status
                .is_some_and(|s| s.allowed)
        }
    };
    let rw = ["get", "list", "watch", "create", "patch", "delete"];
    let read = ["get", "list", "watch"];
    let allowed: Vec<(&str, &str, Vec<&str>, Option<&str>)> = vec![
        (
            "kubevirt.io",
            "virtualmachines",
            rw.to_vec(),
            Some("team-a"),
        ),
        (
            "kubevirt.io",
            "virtualmachineinstances",
            vec!["get", "list", "watch", "delete"],
            Some("team-a"),
        ),
        ("", "persistentvolumeclaims", rw.to_vec(), Some("team-a")),
        (
            "cdi.kubevirt.io",
            "datavolumes",
            rw.to_vec(),
            Some("team-a"),
        ),
        (
            "k8s.cni.cncf.io",
            "network-attachment-definitions",
            rw.to_vec(),
            Some("team-a"),
        ),
        (
            "",
            "secrets",
            vec!["get", "create", "patch", "delete"],
            Some("team-a"),
        ),
        (
            "",
            "namespaces",
            vec!["create", "get", "list", "watch", "patch"],
            None,
        ),
        ("storage.k8s.io", "storageclasses", read.to_vec(), None),
        ("cdi.kubevirt.io", "storageprofiles", read.to_vec(), None),
        ("events.k8s.io", "events", vec!["create"], Some("team-a")),
    ];
    for (group, resource, verbs, ns) in allowed {
        for verb in verbs {
            assert!(
                may(group, resource, verb, ns).await,
                "{verb} {group}/{resource} in {ns:?} must be allowed"
            );
        }
    }
    let refused = [
        ("", "nodes", "delete", None),
        ("", "namespaces", "delete", None),
        ("", "secrets", "list", Some("team-a")),
        (
            "kubevirt.io",
            "virtualmachineinstances",
            "create",
            Some("team-a"),
        ),
        ("rbac.authorization.k8s.io", "clusterroles", "create", None),
        (
            "cdi.kubevirt.io",
            "datavolumes/source",
            "create",
            Some("os-images"),
        ),
    ];
    for (group, resource, verb, ns) in refused {
        assert!(
            !may(group, resource, verb, ns).await,
            "{verb} {group}/{resource} in {ns:?} must be refused"
        );
    }
}
