//! Issue 24, what the chart installs that an upgrade and an uninstall rely on, rendered by the
//! real `helm template`: the CRDs as templates kept on uninstall, and the webhook configurations
//! in both certificate modes, named per release and shaped as the operator expects; the values
//! only the templates can check. Types and patterns of each value: `chart_schema.rs`.

mod chart;

use chart::{
    ALL_TOGGLES, NAMESPACE, chart_dir, docs, env, helm_template, one, repo, text, tool, values_file,
};
use serde_json::{Value, json};

/// The CRDs are templates (files/crds/, rendered by templates/crds.yaml) so that `helm upgrade`
/// updates them; a `crds/` directory would be installed once and never upgraded by Helm.
#[test]
fn the_chart_ships_the_generated_crds() {
    assert!(
        !chart_dir().join("crds").exists(),
        "charts/kubevirt-operator/crds/ is installed once and never upgraded by Helm: put CRDs in files/crds/"
    );
    assert_eq!(
        std::fs::read_to_string(chart_dir().join("files/crds/crds.yaml")).expect("chart CRDs"),
        std::fs::read_to_string(repo("manifests/crds.yaml")).expect("manifests/crds.yaml"),
        "copy manifests/crds.yaml to charts/kubevirt-operator/files/crds/crds.yaml"
    );
    // Every CRD of every file there is rendered, kept on uninstall by default; crds.enabled=false
    // renders none, crds.keep=false drops the policy.
    let objs = docs(&helm_template(&[], &[]));
    let crds: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .collect();
    let in_files: usize = std::fs::read_dir(chart_dir().join("files/crds"))
        .expect("files/crds")
        .map(|f| std::fs::read_to_string(f.expect("entry").path()).expect("read"))
        .map(|t| docs(&t).len())
        .sum();
    assert_eq!(crds.len(), in_files);
    for crd in &crds {
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{}",
            crd["metadata"]["name"]
        );
        assert_eq!(
            crd["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "Helm"
        );
    }
    let off = docs(&helm_template(&[], &["--set", "crds.enabled=false"]));
    assert!(!off.iter().any(|o| o["kind"] == "CustomResourceDefinition"));
    let unkept = docs(&helm_template(&[], &["--set", "crds.keep=false"]));
    assert!(
        unkept
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .all(|o| o["metadata"]["annotations"]["helm.sh/resource-policy"].is_null())
    );
}

/// Both certificate modes ship the same webhook configurations, named per release, as
/// src/certs/webhook_config.rs describes them (the shape the operator fills and
/// `kubevirt-operator webhook-configurations` prints), with no caBundle: switching modes
/// replaces no object, so none is left behind with failurePolicy Fail. cert-manager mode adds
/// cert-manager's CA injection and gives the operator no Secret rights.
#[test]
fn webhook_configurations_match_the_operators_shape_in_both_modes() {
    let all = values_file("all-toggles", ALL_TOGGLES);
    let lifetimes = kubevirt_operator::certs::CertificateArgs::default()
        .lifetimes()
        .expect("lifetimes");
    let settings = kubevirt_operator::certs::Settings::new(NAMESPACE, None, lifetimes)
        .expect("settings")
        .with_service("custom-webhook")
        .expect("service")
        .with_watch_scope(&kubevirt_operator::config::WatchScope::Namespaces(vec![
            "team-a".into(),
        ]));
    let self_managed = values_file(
        "all-toggles-self-managed",
        &format!("{ALL_TOGGLES}\ncertificates: {{mode: self-managed}}\n"),
    );
    use kubevirt_operator::certs::webhook_config::{
        mutating, skipping_finalizer_updates, validating,
    };
    // `helm template` renders for a Kubernetes 1.28+ by default: the finalizer-only
    // matchCondition on every webhook; for a 1.27 or older server, none (the field is not served).
    let cases = [
        (&all, true, None),
        (&self_managed, false, None),
        (&all, true, Some("1.27.9")),
        (&self_managed, false, Some("1.20.2")),
    ];
    for (values, injected, kube_version) in cases {
        let extra: Vec<&str> = kube_version
            .map(|v| vec!["--kube-version", v])
            .unwrap_or_default();
        let objs = docs(&helm_template(&[values], &extra));
        let (m, v) = (mutating(&settings, b""), validating(&settings, b""));
        let (m, v) = match kube_version {
            None => (skipping_finalizer_updates(m), skipping_finalizer_updates(v)),
            Some(_) => (m, v),
        };
        let ours = [
            (
                "MutatingWebhookConfiguration",
                serde_json::to_value(m).expect("json"),
            ),
            (
                "ValidatingWebhookConfiguration",
                serde_json::to_value(v).expect("json"),
            ),
        ];
        for (kind, desired) in ours {
            let chart = one(&objs, kind);
            assert_eq!(chart["webhooks"], desired["webhooks"], "{kind}");
            assert_eq!(chart["metadata"]["name"], desired["metadata"]["name"]);
            assert!(!chart.to_string().contains("caBundle"), "{chart}");
            let injection = &chart["metadata"]["annotations"]["cert-manager.io/inject-ca-from"];
            if injected {
                assert_eq!(
                    injection,
                    &json!(format!("{NAMESPACE}/kubevirt-operator-webhook-cert"))
                );
            } else {
                assert!(injection.is_null(), "{chart}");
            }
        }
        let d = one(&objs, "Deployment");
        assert_eq!(
            env(d, "WEBHOOK_CONFIGURATION_NAME").as_deref(),
            Some("kubevirt-operator")
        );
        assert_eq!(
            env(d, "CERT_FILE").as_deref(),
            injected.then_some("/tls/tls.crt")
        );
        assert_eq!(
            objs.iter().any(|o| o["kind"] == "Role"
                && o["metadata"]["name"] == "kubevirt-operator-certificates"),
            !injected,
            "the operator holds certificate Secret rights only when it manages them"
        );
    }
    let objs = docs(&helm_template(&[&all], &[]));
    let cert = one(&objs, "Certificate");
    assert!(
        cert["spec"]["dnsNames"]
            .as_array()
            .expect("dnsNames")
            .contains(&json!(format!("custom-webhook.{NAMESPACE}.svc")))
    );
    // Another release: its own names, so two releases never overwrite each other's.
    let edge = docs(&chart::run({
        let mut cmd = tool("helm");
        cmd.args(["template", "edge"])
            .arg(chart_dir())
            .args(["-n", "edge-system"]);
        cmd
    }));
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let c = one(&edge, kind);
        assert_eq!(c["metadata"]["name"], "edge-kubevirt-operator");
        assert_eq!(
            c["webhooks"][0]["clientConfig"]["service"],
            json!({"name": "edge-kubevirt-operator-webhook", "namespace": "edge-system",
                "path": c["webhooks"][0]["clientConfig"]["service"]["path"], "port": 443})
        );
    }
    assert_eq!(
        env(one(&edge, "Deployment"), "WEBHOOK_CONFIGURATION_NAME").as_deref(),
        Some("edge-kubevirt-operator")
    );
}

/// What only the templates can check (across values): the grace period against the drain.
/// Every single value's type, range and pattern is values.schema.json's: `chart_schema.rs`.
#[test]
fn bad_values_are_refused_naming_the_value() {
    for (set, message) in [
        (
            "terminationGracePeriodSeconds=5",
            "must exceed drainPeriodSeconds 10 + 11",
        ),
        (
            "terminationGracePeriodSeconds=21",
            "must exceed drainPeriodSeconds 10 + 11",
        ),
    ] {
        let out = tool("helm")
            .args(["template", "x"])
            .arg(chart_dir())
            .args(["--set", set])
            .output()
            .expect("helm");
        assert!(!out.status.success(), "{set}: accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(message),
            "{set}: {}",
            text(&out)
        );
    }
}
