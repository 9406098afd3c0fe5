//! KubevirtConfigs probed, rotated and forgotten.

use crate::support::{Fixture, OPERATOR_NAMESPACE, eventually};
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubevirt_operator::api::KubevirtConfig;
use kubevirt_operator::clusters::{self, Apis, Health, Reason, Registry, Settings};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubevirt_configs_are_probed_rotated_and_forgotten() {
    let started = Instant::now();
    // Ours on the management cluster, KubeVirt's and CDI's on the remote one.
    let theirs = [
        repo("tests/fixtures/crds/virtualmachines.kubevirt.io.yaml"),
        repo("tests/fixtures/crds/datavolumes.cdi.kubevirt.io.yaml"),
    ];
    let (management, mut remote) = tokio::join!(
        least_privileged(Fixture::new().with_machine_crds()).start(),
        Fixture::new()
            .with_crds(theirs)
            // Known to the remote, with no rights there; and an admin for a second rotation.
            .user("nobody", &[])
            .user("operator-2", &["system:masters"])
            .start()
    );
    let admin = management.admin_client().await;
    let configs: Api<KubevirtConfig> = Api::all(admin.clone());

    // Five configs: no Secret, no key, garbage, credentials the remote refuses (401), a user
    // the remote knows but gives no rights (403).
    secret(&admin, "no-key", "config", "x").await;
    secret(&admin, "garbage", "kubeconfig", "clusters: [unclosed").await;
    let refused = token_kubeconfig(remote.server_url(), remote.ca_pem(), "not-a-token");
    secret(&admin, "dc1-kubeconfig", "kubeconfig", &refused).await;
    let nobody = (remote.kubeconfig_yaml(remote.user("nobody"), None)).expect("kubeconfig");
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
        management.client_of(CONTROLLER).await,
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
            // Only CDI's DataVolume CRD is installed there: StorageProfiles are told apart.
            storage_profiles: false,
            multus: false,
            // Nor KubeVirt's snapshot CRDs: a remote Machine's snapshots fail saying so.
            kubevirt_snapshots: false,
            // Nor KubeVirt's install CRD: no disk hot-plugs there.
            kubevirt_installs: false,
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
    // every 5 minutes). A window, not a wait for a state: it holds about three probes.
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
    let other = (remote.kubeconfig_yaml(remote.user("operator-2"), None)).expect("kubeconfig");
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
    tokio::time::timeout(Duration::from_secs(30), controller)
        .await
        .expect("the controller stops")
        .expect("join");
    assert!(registry.subscribe().borrow().is_empty());
    eprintln!("clusters e2e took {:?}", started.elapsed());
}
