use super::*;
use crate::certs::config::CertificateArgs;

fn settings(url: Option<&str>) -> Settings {
    Settings::new(
        "kubevirt-operator-system",
        url,
        CertificateArgs::default().lifetimes().unwrap(),
    )
    .unwrap()
}

#[test]
fn in_cluster_points_at_the_service() {
    let m = mutating(&settings(None), b"PEM");
    assert_eq!(m.metadata.name.as_deref(), Some("kubevirt-operator"));
    assert_eq!(
        m.metadata.labels.as_ref().unwrap()["app.kubernetes.io/name"],
        "kubevirt-operator"
    );
    let h = &m.webhooks.as_ref().unwrap()[0];
    let svc = h.client_config.service.as_ref().unwrap();
    assert_eq!(
        (svc.name.as_str(), svc.namespace.as_str(), svc.port),
        (
            "kubevirt-operator-webhook",
            "kubevirt-operator-system",
            Some(443)
        )
    );
    assert_eq!(
        svc.path.as_deref(),
        Some("/mutate-vitistack-io-v1alpha1-machine")
    );
    assert!(h.client_config.url.is_none());
    assert_eq!(h.client_config.ca_bundle.as_ref().unwrap().0, b"PEM");
    assert_eq!(h.side_effects, "None");
    assert_eq!(h.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(h.timeout_seconds, Some(5));
    assert_eq!(h.admission_review_versions, ["v1", "v1beta1"]);
    let rule = &h.rules.as_ref().unwrap()[0];
    assert_eq!(rule.api_groups.as_ref().unwrap(), &["vitistack.io"]);
    assert_eq!(rule.api_versions.as_ref().unwrap(), &["v1alpha1"]);
    assert_eq!(rule.resources.as_ref().unwrap(), &["machines"]);
    assert_eq!(rule.operations.as_ref().unwrap(), &["CREATE", "UPDATE"]);
}

#[test]
fn out_of_cluster_uses_the_url() {
    let v = validating(&settings(Some("https://127.0.0.1:9443")), b"PEM");
    let h = &v.webhooks.as_ref().unwrap()[0];
    assert_eq!(
        h.client_config.url.as_deref(),
        Some("https://127.0.0.1:9443/validate-vitistack-io-v1alpha1-machine")
    );
    assert!(h.client_config.service.is_none());
}

#[test]
fn network_configurations_have_their_own_validating_webhook() {
    let v = validating(&settings(Some("https://127.0.0.1:9443")), b"PEM");
    let h = &v.webhooks.as_ref().unwrap()[1];
    assert_eq!(h.name, NETWORK_WEBHOOK_NAME);
    assert_eq!(
        h.client_config.url.as_deref(),
        Some("https://127.0.0.1:9443/validate-vitistack-io-v1alpha1-networkconfiguration")
    );
    let rule = &h.rules.as_ref().unwrap()[0];
    assert_eq!(rule.resources.as_ref().unwrap(), &["networkconfigurations"]);
    assert_eq!(rule.operations.as_ref().unwrap(), &["CREATE", "UPDATE"]);
    assert_eq!(h.client_config.ca_bundle.as_ref().unwrap().0, b"PEM");
}

#[test]
fn machine_classes_have_a_cluster_scoped_validating_webhook() {
    let v = validating(&settings(Some("https://127.0.0.1:9443")), b"PEM");
    let h = &v.webhooks.as_ref().unwrap()[4];
    assert_eq!(h.name, MACHINE_CLASS_WEBHOOK_NAME);
    assert_eq!(
        h.client_config.url.as_deref(),
        Some("https://127.0.0.1:9443/validate-vitistack-io-v1alpha1-machineclass")
    );
    let rule = &h.rules.as_ref().unwrap()[0];
    assert_eq!(rule.resources.as_ref().unwrap(), &["machineclasses"]);
    assert_eq!(rule.scope.as_deref(), Some("Cluster"));
    assert_eq!(rule.operations.as_ref().unwrap(), &["CREATE", "UPDATE"]);
    assert_eq!(h.namespace_selector, Some(LabelSelector::default()));
    assert_eq!(h.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(h.side_effects, "None");
    assert_eq!(h.timeout_seconds, Some(5));
}

/// Only caBundle, and only of the webhooks that call us: another release's or another
/// product's webhook in the same configuration keeps its own.
#[test]
fn fill_writes_the_ca_bundle_of_our_webhooks_only() {
    let ours = settings(None);
    let installed = validating(&ours, b"");
    assert!(
        installed
            .client_configs()
            .iter()
            .all(|c| c.ca_bundle.is_none())
    );
    let mut live = installed.clone();
    let hooks = live.webhooks.as_mut().unwrap();
    hooks[0].timeout_seconds = Some(9); // an admin's edit through the chart stays
    let mut foreign = hooks[1].clone();
    foreign.name = "other.example.com".into();
    let svc = foreign.client_config.service.as_mut().unwrap();
    svc.name = "other".into();
    foreign.client_config.ca_bundle = Some(ByteString(b"THEIRS".to_vec()));
    hooks.push(foreign);

    let filled = fill(&live, &ours, b"PEM").unwrap();
    let b = |c: &ValidatingWebhookConfiguration, i: usize| {
        c.webhooks.as_ref().unwrap()[i]
            .client_config
            .ca_bundle
            .clone()
    };
    assert_eq!(b(&filled, 0), Some(ByteString(b"PEM".to_vec())));
    assert_eq!(b(&filled, 1), Some(ByteString(b"PEM".to_vec())));
    assert_eq!(
        b(&filled, 2),
        Some(ByteString(b"PEM".to_vec())),
        "MachineSnapshots'"
    );
    assert_eq!(
        b(&filled, 3),
        Some(ByteString(b"PEM".to_vec())),
        "MachineRestores'"
    );
    assert_eq!(
        b(&filled, 4),
        Some(ByteString(b"PEM".to_vec())),
        "MachineClasses'"
    );
    assert_eq!(b(&filled, 5), Some(ByteString(b"THEIRS".to_vec())));
    assert_eq!(
        filled.webhooks.as_ref().unwrap()[0].timeout_seconds,
        Some(9)
    );
    assert_eq!(bundles(&filled, &ours).len(), 5);

    // Another namespace's Service, or a URL when we run in the cluster: not ours.
    let elsewhere = Settings::new(
        "elsewhere",
        None,
        CertificateArgs::default().lifetimes().unwrap(),
    )
    .unwrap();
    assert!(fill(&live, &elsewhere, b"PEM").is_none());
    let by_url = settings(Some("https://127.0.0.1:9443"));
    assert!(fill(&live, &by_url, b"PEM").is_none());
    assert!(fill(&validating(&by_url, b""), &by_url, b"PEM").is_some());
    let other_port = settings(Some("https://127.0.0.1:9444"));
    assert!(fill(&validating(&by_url, b""), &other_port, b"PEM").is_none());
}

#[test]
fn the_name_is_the_releases() {
    let s = settings(None)
        .with_webhook_configuration("edge-kubevirt-operator")
        .unwrap();
    assert_eq!(
        mutating(&s, b"").metadata.name.as_deref(),
        Some("edge-kubevirt-operator")
    );
    assert!(settings(None).with_webhook_configuration("Edge!").is_err());
}

/// Issue 21: MachineSnapshots and MachineRestores, namespaced and failing closed like Machines
/// (a restore admitted unchecked could rewrite a Machine its author may not update).
#[test]
fn snapshots_and_restores_have_namespaced_validating_webhooks() {
    let v = validating(&settings(Some("https://127.0.0.1:9443")), b"PEM");
    let hooks = v.webhooks.as_ref().unwrap();
    for (h, (name, path, resource)) in hooks[2..4].iter().zip([
        (SNAPSHOT_WEBHOOK_NAME, "machinesnapshot", "machinesnapshots"),
        (RESTORE_WEBHOOK_NAME, "machinerestore", "machinerestores"),
    ]) {
        assert_eq!(h.name, name);
        assert_eq!(
            h.client_config.url.as_deref(),
            Some(format!("https://127.0.0.1:9443/validate-vitistack-io-v1alpha1-{path}").as_str())
        );
        let rule = &h.rules.as_ref().unwrap()[0];
        assert_eq!(rule.resources.as_ref().unwrap(), &[resource]);
        assert_eq!(rule.scope.as_deref(), Some("Namespaced"));
        assert_eq!(h.failure_policy.as_deref(), Some("Fail"));
    }
}
