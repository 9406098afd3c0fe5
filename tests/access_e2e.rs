//! The access check as the requesting user, end to end: `kubevirt-operator run` (self-managed
//! certificates, webhooks reached by URL) on a dedicated control plane, and Machine authors
//! minted as real users with and without `get secrets` in their namespace. kube-apiserver calls
//! the validating webhook, which asks kube-apiserver with a SubjectAccessReview as the author.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};

use kubevirt_operator::api::{Machine, NetworkConfiguration};
use support::{ControlPlane, Proc};

const WAIT: Duration = Duration::from_secs(90);

/// `run` with self-managed certificates: it registers its own webhook configurations for the
/// whole cluster, hence the dedicated control plane.
fn start_operator(cp: &ControlPlane, op_ns: &str, extra: &[&str]) -> Proc {
    let [webhook, metrics, probes] = [(); 3].map(|()| support::free_port().expect("port"));
    let dir = cp.dir().join("access-operator");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut args: Vec<String> = [
        "--log-format",
        "json",
        "run",
        "--kubeconfig",
        &cp.admin_kubeconfig().display().to_string(),
        "--namespace",
        op_ns,
        "--identity",
        "access",
        "--reconcile-interval",
        "2s",
        "--webhook-url",
        &format!("https://127.0.0.1:{webhook}"),
        "--listen",
        &format!("127.0.0.1:{webhook}"),
        "--metrics-bind-address",
        &format!("127.0.0.1:{metrics}"),
        "--health-probe-bind-address",
        &format!("127.0.0.1:{probes}"),
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Proc::spawn(
        "kubevirt-operator",
        Path::new(env!("CARGO_BIN_EXE_kubevirt-operator")),
        args.into_iter().map(Into::into).collect(),
        dir.join("operator.log"),
    )
    .expect("spawn operator")
}

async fn create_namespace(admin: &Client, name: &str) {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
}

/// A Role in `ns` with `rules`, bound to `user`.
async fn grant(admin: &Client, ns: &str, user: &str, rules: Vec<PolicyRule>) {
    let mut role = Role {
        rules: Some(rules),
        ..Default::default()
    };
    role.metadata.name = Some(user.into());
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let mut rb = RoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: user.into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            namespace: None,
        }]),
        ..Default::default()
    };
    rb.metadata.name = Some(user.into());
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await
        .expect("role binding");
}

fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..Default::default()
    }
}

fn machine(name: &str, secret: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"cloudInit": {"secretRef": {"name": secret}}}
    }))
    .expect("machine")
}

fn denial<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Api(e)) => {
            assert_eq!(e.code, 403, "{e:?}");
            e.message
        }
        other => panic!("expected the API server to deny, got {other:?}"),
    }
}

/// The webhook's denial of creating `obj`, retried until the webhooks are in force (the
/// operator registers them after it starts).
async fn first_denial(
    api: &Api<DynamicObject>,
    params: &PostParams,
    obj: &DynamicObject,
    op: &Proc,
) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        match api.create(params, obj).await {
            Err(Error::Api(e)) if e.message.contains("admission webhook") => return e.message,
            other => assert!(
                Instant::now() < deadline,
                "webhooks not in force: {other:?}\n{}",
                op.log_tail(60)
            ),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn machines(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Machine>(&()))
}

/// A dedicated control plane with the CRDs, namespace `team-a`, and the operator started.
async fn setup(extra: &[&str]) -> (ControlPlane, Client, Proc) {
    support::init_crypto();
    let cp = ControlPlane::start().await.expect("control plane");
    let mut crds = support::crd_fixtures().expect("fixture CRDs");
    crds.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/crds.yaml"));
    cp.install_crds(&crds).await.expect("CRDs");
    let admin = cp.client().await.expect("admin client");
    create_namespace(&admin, "access-operator").await;
    create_namespace(&admin, "team-a").await;
    let op = start_operator(&cp, "access-operator", extra);
    (cp, admin, op)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_configurations_name_valid_allowed_bridges_only() {
    let (_cp, admin, op) = setup(&["--allowed-bridges", "br0,br-vms"]).await;
    let ncs: Api<NetworkConfiguration> = Api::namespaced(admin, "team-a");
    let nc = |name: &str, spec: Value| -> NetworkConfiguration {
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration",
            "metadata": {"name": name}, "spec": spec
        }))
        .expect("NC")
    };
    let pp = PostParams::default();
    let deadline = Instant::now() + WAIT;
    let message = loop {
        match ncs
            .create(&pp, &nc("host", json!({"bridge": "br-host"})))
            .await
        {
            Err(Error::Api(e)) if e.message.contains("admission webhook") => break e.message,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "webhook not in force: {other:?}\n{}",
                    op.log_tail(60)
                );
                // Admitted before the webhook was registered: try again.
                let _ = ncs.delete("host", &Default::default()).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(
        message.contains(
            r#"spec.bridge: Unsupported value: "br-host": supported values: "br-vms", "br0""#
        ),
        "{message}"
    );
    ncs.create(&pp, &nc("lan", json!({"bridge": "br0", "vlan": 4094})))
        .await
        .expect("an allowed bridge");
    // The static rules are in the CRD schema: kube-apiserver refuses before any webhook.
    for (spec, field) in [
        (json!({"bridge": "br/0"}), "spec.bridge"),
        (json!({"bridge": "bridge-too-long0"}), "spec.bridge"),
        (json!({"bridge": ".."}), "spec.bridge"),
        (json!({"bridge": "br0", "vlan": 4095}), "spec.vlan"),
    ] {
        match ncs.create(&pp, &nc("bad", spec.clone())).await {
            Err(Error::Api(e)) => {
                assert_eq!(e.code, 422, "{spec}: {e:?}");
                assert!(e.message.contains(field), "{spec}: {}", e.message);
            }
            other => panic!("{spec} admitted: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_refs_are_admitted_only_for_authors_who_may_get_the_secret() {
    let (cp, admin, op) = setup(&[]).await;
    let ns = "team-a";

    let write_machines = rule("vitistack.io", "machines", &["get", "create", "patch"]);
    grant(
        &admin,
        ns,
        "alice",
        vec![write_machines.clone(), rule("", "secrets", &["get"])],
    )
    .await;
    grant(&admin, ns, "bob", vec![write_machines]).await;
    let alice = cp
        .client_for(&cp.mint_user("alice", &["devs"]).expect("alice"))
        .await
        .expect("alice client");
    let bob = cp
        .client_for(&cp.mint_user("bob", &["devs"]).expect("bob"))
        .await
        .expect("bob client");
    let (as_alice, as_bob) = (machines(&alice, ns), machines(&bob, ns));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };

    // Until the webhooks are in force, bob's reference is admitted: wait for the denial.
    let forbidden = format!(
        r#"spec.cloudInit.secretRef.name: Forbidden: user "bob" cannot get secrets in namespace "{ns}""#
    );
    let message = first_denial(&as_bob, &dry, &machine("probe", "boot"), &op).await;
    // Dry-run is checked like a real write.
    assert!(message.contains(&forbidden), "{message}");

    // Allowed: alice may get Secrets there (the Secret need not exist: nothing is read).
    as_alice
        .create(&PostParams::default(), &machine("alices", "boot"))
        .await
        .expect("alice may refer to a Secret she can get");
    as_alice
        .create(&dry, &machine("alices-dry", "boot"))
        .await
        .expect("and so may her dry runs");

    // Denied: bob may not; the message is the same whether the Secret exists or not.
    let message = denial(
        as_bob
            .create(&PostParams::default(), &machine("bobs", "boot"))
            .await,
    );
    assert!(message.contains(&forbidden), "{message}");
    assert!(!message.contains("boot"), "names the Secret: {message}");
    let missing = denial(
        as_bob
            .create(&PostParams::default(), &machine("bobs", "no-such-secret"))
            .await,
    );
    assert_eq!(
        missing.replace("no-such-secret", "boot"),
        message,
        "existence leaks"
    );

    // UPDATE: an unchanged reference is not checked again, a changed one is.
    let pp = PatchParams::default();
    as_bob
        .patch(
            "alices",
            &pp,
            &Patch::Merge(json!({"spec": {"resources": {"cpu": {"cores": 3}}}})),
        )
        .await
        .expect("bob's edit that keeps alice's reference");
    let changed: Value = json!({"spec": {"cloudInit": {"secretRef": {"name": "other"}}}});
    let message = denial(as_bob.patch("alices", &pp, &Patch::Merge(&changed)).await);
    assert!(message.contains(&forbidden), "{message}");
    let message = denial(
        as_bob
            .patch(
                "alices",
                &PatchParams {
                    dry_run: true,
                    ..Default::default()
                },
                &Patch::Merge(&changed),
            )
            .await,
    );
    assert!(message.contains(&forbidden), "{message}");
    as_alice
        .patch("alices", &pp, &Patch::Merge(&changed))
        .await
        .expect("alice may change it");
}

fn cloning_machine(name: &str, source_ns: &str) -> DynamicObject {
    cloning(name, "golden-debian-12", source_ns)
}

fn cloning(name: &str, pvc: &str, source_ns: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"template": "small", "disks": [{"name": "root",
            "source": {"pvc": {"name": pvc, "namespace": source_ns}}}]}
    }))
    .expect("machine")
}

/// Issue 12: a clone from another namespace is admitted only for an author who passes CDI's own
/// rule there (`create` on `datavolumes/source`), asked as that author; and a disk's source
/// never changes once set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_namespace_clones_need_the_authors_cdi_clone_right() {
    let (cp, admin, op) = setup(&[]).await;
    let ns = "team-a";
    create_namespace(&admin, "os-images").await;
    let write_machines = rule("vitistack.io", "machines", &["get", "create", "patch"]);
    grant(&admin, ns, "carol", vec![write_machines.clone()]).await;
    grant(&admin, ns, "dave", vec![write_machines]).await;
    // Limited by name, as CDI asks about the source PVC by name.
    let clone_right = PolicyRule {
        resource_names: Some(vec!["golden-debian-12".into()]),
        ..rule("cdi.kubevirt.io", "datavolumes/source", &["create"])
    };
    grant(&admin, "os-images", "carol", vec![clone_right]).await;
    let carol = cp
        .client_for(&cp.mint_user("carol", &[]).expect("carol"))
        .await
        .expect("carol client");
    let dave = cp
        .client_for(&cp.mint_user("dave", &[]).expect("dave"))
        .await
        .expect("dave client");
    let (as_carol, as_dave) = (machines(&carol, ns), machines(&dave, ns));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };

    let forbidden = r#"spec.disks[0].source.pvc.namespace: Forbidden: user "dave" cannot create datavolumes/source.cdi.kubevirt.io in namespace "os-images""#;
    let message = first_denial(&as_dave, &dry, &cloning_machine("probe", "os-images"), &op).await;
    assert!(message.contains(forbidden), "{message}");
    let message = denial(
        as_dave
            .create(
                &PostParams::default(),
                &cloning_machine("daves", "os-images"),
            )
            .await,
    );
    assert!(message.contains(forbidden), "{message}");
    // A clone from the Machine's own namespace asks nothing more of its author.
    as_dave
        .create(&PostParams::default(), &cloning_machine("daves-local", ns))
        .await
        .expect("a clone in the author's namespace");

    as_carol
        .create(
            &PostParams::default(),
            &cloning_machine("carols", "os-images"),
        )
        .await
        .expect("carol may clone from os-images");
    let other = as_carol
        .create(&dry, &cloning("carols-13", "golden-debian-13", "os-images"))
        .await;
    assert!(denial(other).contains(r#"user "carol" cannot create datavolumes/source"#));

    // Sources are immutable: CDI never imports or clones again.
    let changed = json!({"spec": {"disks": [{"name": "root",
        "source": {"pvc": {"name": "golden-debian-13", "namespace": "os-images"}}}]}});
    match as_carol
        .patch("carols", &PatchParams::default(), &Patch::Merge(&changed))
        .await
    {
        Err(Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(e.message.contains("spec.disks[0].source"), "{}", e.message);
        }
        other => panic!("a changed source was admitted: {other:?}"),
    }
}
