//! The access check as the requesting user, end to end: `kubevirt-operator run` (self-managed
//! certificates, webhooks reached by URL) on a dedicated control plane, and Machine authors
//! minted as real users with and without `get secrets` in their namespace. kube-apiserver calls
//! the validating webhook, which asks kube-apiserver with a SubjectAccessReview as the author.

mod access;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Error;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use access::{WAIT, denial, first_denial, fixture, machines, rule};
use kubevirt_operator::api::NetworkConfiguration;

fn machine(name: &str, secret: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"cloudInit": {"secretRef": {"name": secret}}}
    }))
    .expect("machine")
}

/// Issue 25: bridges and VLANs only from the admin's lists, and only for authors who may create
/// the NetworkAttachmentDefinition it becomes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_configurations_name_valid_allowed_bridges_only() {
    // The author needs Multus' own right for the attachment it becomes.
    let write_ncs = rule(
        "vitistack.io",
        "networkconfigurations",
        &["get", "create", "patch"],
    );
    let nads = rule(
        "k8s.cni.cncf.io",
        "network-attachment-definitions",
        &["create"],
    );
    let env = fixture(&[
        "--allowed-bridges",
        "br0,br-vms",
        "--allowed-vlans",
        "0,100-199",
    ])
    .user("dave", &["devs"])
    .user("erin", &["devs"])
    .grant("team-a", "dave", vec![write_ncs.clone()])
    .grant("team-a", "erin", vec![write_ncs, nads])
    .start()
    .await;
    let (admin, op) = (env.admin_client().await, env.replica());
    let ncs: Api<NetworkConfiguration> = Api::namespaced(admin.clone(), "team-a");
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
            r#"spec.bridge: Unsupported value: "br-host": the operator's --allowed-bridges (ALLOWED_BRIDGES) allows br-vms, br0"#
        ),
        "{message}"
    );
    let message = match ncs
        .create(&pp, &nc("tagged", json!({"bridge": "br0", "vlan": 200})))
        .await
    {
        Err(Error::Api(e)) if e.code == 422 => e.message,
        other => panic!("VLAN 200 admitted: {other:?}"),
    };
    assert!(
        message.contains(
            r#"spec.vlan: Unsupported value: 200: the operator's --allowed-vlans (ALLOWED_VLANS) allows 0,100-199 (0: untagged)"#
        ),
        "{message}"
    );
    ncs.create(&pp, &nc("lan", json!({"bridge": "br0", "vlan": 150})))
        .await
        .expect("an allowed bridge and VLAN");

    let as_user = |name: &'static str| {
        let env = &env;
        async move { Api::<NetworkConfiguration>::namespaced(env.client_of(name).await, "team-a") }
    };
    let message = denial(
        as_user("dave")
            .await
            .create(&pp, &nc("daves", json!({"bridge": "br0"})))
            .await,
    );
    assert!(
        message.contains(
            r#"spec: Forbidden: user "dave" cannot create network-attachment-definitions.k8s.cni.cncf.io in namespace "team-a""#
        ),
        "{message}"
    );
    as_user("erin")
        .await
        .create(&pp, &nc("erins", json!({"bridge": "br0"})))
        .await
        .expect("erin may create attachments");
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
    let ns = "team-a";
    let write_machines = rule("vitistack.io", "machines", &["get", "create", "patch"]);
    let env = fixture(&[])
        .user("alice", &["devs"])
        .user("bob", &["devs"])
        .grant(
            ns,
            "alice",
            vec![write_machines.clone(), rule("", "secrets", &["get"])],
        )
        .grant(ns, "bob", vec![write_machines])
        .start()
        .await;
    let op = env.replica();
    let (alice, bob) = (env.client_of("alice").await, env.client_of("bob").await);
    let (as_alice, as_bob) = (machines(&alice, ns), machines(&bob, ns));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };

    // Until the webhooks are in force, bob's reference is admitted: wait for the denial.
    let forbidden = format!(
        r#"spec.cloudInit.secretRef.name: Forbidden: user "bob" cannot get secrets in namespace "{ns}""#
    );
    let message = first_denial(&as_bob, &dry, &machine("probe", "boot"), op).await;
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
    let ns = "team-a";
    let write_machines = rule("vitistack.io", "machines", &["get", "create", "patch"]);
    // Limited by name, as CDI asks about the source PVC by name.
    let clone_right = PolicyRule {
        resource_names: Some(vec!["golden-debian-12".into()]),
        ..rule("cdi.kubevirt.io", "datavolumes/source", &["create"])
    };
    let env = fixture(&[])
        .namespace("os-images")
        .user("carol", &[])
        .user("dave", &[])
        .grant(ns, "carol", vec![write_machines.clone()])
        .grant(ns, "dave", vec![write_machines])
        .grant("os-images", "carol", vec![clone_right])
        .start()
        .await;
    let op = env.replica();
    let (carol, dave) = (env.client_of("carol").await, env.client_of("dave").await);
    let (as_carol, as_dave) = (machines(&carol, ns), machines(&dave, ns));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };

    let forbidden = r#"spec.disks[0].source.pvc.namespace: Forbidden: user "dave" cannot create datavolumes/source.cdi.kubevirt.io "golden-debian-12" in namespace "os-images""#;
    let message = first_denial(&as_dave, &dry, &cloning_machine("probe", "os-images"), op).await;
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
    // A clone from the Machine's own namespace is asked too (issue 25): CDI would let the
    // operator, the DataVolume's creator, through unasked.
    let local = denial(
        as_dave
            .create(&PostParams::default(), &cloning_machine("daves-local", ns))
            .await,
    );
    assert!(
        local.contains(&format!(
            r#"cannot create datavolumes/source.cdi.kubevirt.io "golden-debian-12" in namespace "{ns}""#
        )),
        "{local}"
    );

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
