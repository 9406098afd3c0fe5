//! Issue 31 end to end on two real control planes: a Machine placed on a remote cluster is
//! written by a non-admin author (a client certificate, with only `create machines` and what
//! each case grants), and is asked what a local one is asked, against the management cluster's
//! RBAC of its namespace: `use` on the KubevirtConfig it names; `create datavolumes/source` for
//! a clone, same namespace included; `get` on a source's credential Secret; `update` and
//! `delete` on the claim a new disk would adopt (the webhook cannot see the remote cluster, so
//! every new disk's claim is asked about).

mod access;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};

use access::{WAIT, create_namespace, first_denial, grant, machines, rule, start_operator};
use kubevirt_operator::api::KubevirtConfig;
use support::{ControlPlane, Proc};

const NS: &str = "team-a";
const OP_NS: &str = "access-operator";

fn machine(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "annotations": {"vitistack.io/kubevirt-config": "dc1"}},
        "spec": spec
    }))
    .expect("machine")
}

/// `use` on KubevirtConfig `config`, granted by name to `user` cluster-wide (the resource is
/// cluster-scoped), as an admin grants it.
async fn grant_use(admin: &Client, user: &str, config: &str) {
    let mut role = ClusterRole {
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["vitistack.io".into()]),
            resources: Some(vec!["kubevirtconfigs".into()]),
            resource_names: Some(vec![config.into()]),
            verbs: vec!["use".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    let name = format!("{user}-uses-{config}");
    role.metadata.name = Some(name.clone());
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("cluster role");
    let mut binding = ClusterRoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(name);
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("cluster role binding");
}

/// Creates `obj` as soon as the webhook admits it: a grant made just before reaches the
/// webhook once its remembered verdicts expire (a few seconds).
async fn admitted(api: &Api<DynamicObject>, obj: &DynamicObject, op: &Proc) {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => return,
            Err(Error::Api(e)) if Instant::now() < deadline && e.code == 403 => {}
            Err(e) => panic!("not admitted: {e}\n{}", op.log_tail(60)),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn refused_for(message: &str, want: &str) {
    assert!(message.contains(want), "want {want:?} in: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_machines_author_is_asked_what_a_local_one_is() {
    support::init_crypto();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ours = support::crd_fixtures().expect("fixture CRDs");
    ours.push(root.join("manifests/crds.yaml"));
    let theirs = support::crd_fixtures().expect("fixture CRDs");
    let (mgmt, remote) = tokio::join!(
        async {
            let cp = ControlPlane::start().await?;
            cp.install_crds(&ours).await?;
            Ok::<_, anyhow::Error>(cp)
        },
        async {
            let cp = ControlPlane::start().await?;
            cp.install_crds(&theirs).await?;
            Ok::<_, anyhow::Error>(cp)
        }
    );
    let (mgmt, remote) = (mgmt.expect("management"), remote.expect("remote"));
    let admin = mgmt.client().await.expect("management client");
    create_namespace(&admin, OP_NS).await;
    create_namespace(&admin, NS).await;
    let kubeconfig = remote
        .kubeconfig_yaml(remote.admin(), None)
        .expect("remote kubeconfig");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "dc1-kubeconfig"},
        "stringData": {"kubeconfig": kubeconfig}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(admin.clone(), OP_NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("kubeconfig Secret");
    let config: KubevirtConfig = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": {"name": "dc1"},
        "spec": {"kubeconfigSecretRef": "dc1-kubeconfig", "secretNamespace": OP_NS}
    }))
    .expect("config");
    Api::<KubevirtConfig>::all(admin.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("KubevirtConfig");
    let op = start_operator(
        &mgmt,
        OP_NS,
        &["--kubevirt-config-probe-interval", "1s"],
    )
    .await;

    // bob may only create (and read) Machines in team-a.
    grant(
        &admin,
        NS,
        "bob",
        vec![rule("vitistack.io", "machines", &["get", "create"])],
    )
    .await;
    let bob = mgmt.mint_user("bob", &["devs"]).expect("bob");
    let bob = machines(&mgmt.client_for(&bob).await.expect("bob's client"), NS);
    let pp = PostParams::default();

    // Placement: `use` on the KubevirtConfig, by name.
    let plain = machine("plain", json!({"template": "small"}));
    let message = first_denial(&bob, &pp, &plain, &op).await;
    refused_for(
        &message,
        r#"user "bob" cannot use kubevirtconfigs.vitistack.io "dc1""#,
    );
    grant_use(&admin, "bob", "dc1").await;
    // The root disk's claim lives on dc1, which the webhook cannot see: adopting it is asked
    // as if it existed, on team-a here (the remote namespace mirrors it).
    let message = first_denial(&bob, &pp, &plain, &op).await;
    refused_for(
        &message,
        r#"user "bob" cannot update persistentvolumeclaims "plain-root" in namespace "team-a""#,
    );
    let claims = rule("", "persistentvolumeclaims", &["update", "delete"]);
    grant(&admin, NS, "bob-claims", vec![claims]).await;
    bind_more(&admin, "bob-claims", "bob").await;
    admitted(&bob, &plain, &op).await;

    // A clone of a PVC of the same namespace: CDI's `create datavolumes/source`.
    let clone = machine(
        "clone",
        json!({"template": "small", "disks": [{"name": "root", "source": {"pvc": {"name": "golden"}}}]}),
    );
    let message = first_denial(&bob, &pp, &clone, &op).await;
    refused_for(
        &message,
        r#"user "bob" cannot create datavolumes/source.cdi.kubevirt.io "golden" in namespace "team-a""#,
    );
    let sources = rule("cdi.kubevirt.io", "datavolumes/source", &["create"]);
    grant(&admin, NS, "bob-clones", vec![sources]).await;
    bind_more(&admin, "bob-clones", "bob").await;
    admitted(&bob, &clone, &op).await;

    // A credential Secret the importer would read on bob's behalf.
    let import = machine(
        "import",
        json!({"template": "small", "disks": [{"name": "root", "size": "1Gi", "source": {"http": {
            "url": "https://images.example/a.qcow2", "secretRef": {"name": "creds"}}}}]}),
    );
    let message = first_denial(&bob, &pp, &import, &op).await;
    refused_for(
        &message,
        r#"user "bob" cannot get secrets in namespace "team-a""#,
    );
    grant(&admin, NS, "bob-secrets", vec![rule("", "secrets", &["get"])]).await;
    bind_more(&admin, "bob-secrets", "bob").await;
    admitted(&bob, &import, &op).await;

    // dc2 takes Machines of namespaces labelled tenant=a only; bob may use it.
    let dc2: KubevirtConfig = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": {"name": "dc2"},
        "spec": {"kubeconfigSecretRef": "dc1-kubeconfig", "secretNamespace": OP_NS,
            "namespaceSelector": {"matchLabels": {"tenant": "a"}}}
    }))
    .expect("config");
    Api::<KubevirtConfig>::all(admin.clone())
        .create(&PostParams::default(), &dc2)
        .await
        .expect("KubevirtConfig dc2");
    grant_use(&admin, "bob", "dc2").await;
    let mut selected = machine("selected", json!({"template": "small"}));
    selected.metadata.annotations =
        Some([("vitistack.io/kubevirt-config".to_owned(), "dc2".to_owned())].into());
    let message = first_denial(&bob, &pp, &selected, &op).await;
    refused_for(
        &message,
        r#"KubevirtConfig dc2's namespaceSelector does not select namespace "team-a""#,
    );
    let label = json!({"metadata": {"labels": {"tenant": "a"}}});
    Api::<Namespace>::all(admin.clone())
        .patch(NS, &PatchParams::default(), &Patch::Merge(label))
        .await
        .expect("label team-a");
    admitted(&bob, &selected, &op).await;
}

/// `grant` binds a Role to the user named like it; this binds Role `role` to `user` as well.
async fn bind_more(admin: &Client, role: &str, user: &str) {
    use k8s_openapi::api::rbac::v1::RoleBinding;
    let mut rb = RoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        }]),
        ..Default::default()
    };
    rb.metadata.name = Some(format!("{role}-{user}"));
    Api::<RoleBinding>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &rb)
        .await
        .expect("role binding");
}
