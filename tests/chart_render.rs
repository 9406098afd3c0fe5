//! The Helm chart and the kustomize manifests, rendered by the real tools (helm v4, kubectl's
//! kustomize) and checked: `helm lint`, `kubernetes-validate --strict` against the Kubernetes
//! 1.30 and 1.33 schemas, the chart and kustomize installing the same objects, and the facts
//! an admin relies on (pinned image, no CPU limit, drain within the grace period, the webhook
//! Service name carried to the operator). RBAC: `chart_rbac.rs`.

mod chart;

use std::collections::BTreeMap;

use chart::{
    ALL_TOGGLES, COMPONENTS, NAMESPACE, chart_dir, docs, env, helm_template, kustomize,
    kustomize_for_1_28, kustomize_with_components, one, overlay, repo, run, text, tool,
    values_file,
};
use serde_json::{Value, json};

fn key(doc: &Value) -> String {
    format!(
        "{} {}/{}",
        doc["kind"].as_str().unwrap_or_default(),
        doc["metadata"]["namespace"].as_str().unwrap_or_default(),
        doc["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Objects by kind/namespace/name, without metadata labels and annotations (Helm adds its own),
/// without the Namespace (Helm's `--create-namespace` makes it) and the chart's `helm test`
/// hooks (made only while `helm test` runs); the MachineClass hooks are compared.
fn objects(yaml: &str) -> BTreeMap<String, Value> {
    docs(yaml)
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .filter(|d| {
            let hook = &d["metadata"]["annotations"]["helm.sh/hook"];
            hook.is_null() || d["kind"] == "MachineClass"
        })
        .map(|mut d| {
            if let Some(meta) = d["metadata"].as_object_mut() {
                meta.remove("labels");
                meta.remove("annotations");
            }
            (key(&d), integral(d))
        })
        .collect()
}

/// `256.0` and `256` are the same number to the API server; YAML tools print either.
fn integral(v: Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(integral).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, integral(v))).collect()),
        other => other,
    }
}

/// The first place two values differ, as a JSON pointer with both sides.
fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                first_difference(
                    &format!("{path}/{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                )
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(&format!("{path}/{i}"), p, q)),
        _ if a == b => None,
        _ => Some(format!("{path}: chart {a} vs kustomize {b}")),
    }
}

fn assert_same(chart: &BTreeMap<String, Value>, kustomize: &BTreeMap<String, Value>) {
    let names = |m: &BTreeMap<String, Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(chart), names(kustomize), "the same objects");
    for (k, c) in chart {
        if let Some(diff) = first_difference("", c, &kustomize[k]) {
            panic!("{k} differs at {diff}");
        }
    }
}

#[test]
fn helm_lint_passes_with_default_values_and_every_toggle() {
    let all = values_file("all-toggles", ALL_TOGGLES);
    for extra in [vec![], vec!["-f".to_owned(), all.display().to_string()]] {
        let mut cmd = tool("helm");
        cmd.args(["lint", "--strict"]).arg(chart_dir()).args(&extra);
        let out = run(cmd);
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
}

#[test]
fn chart_and_kustomize_render_the_same_objects() {
    // The chart's NetworkPolicies are on by default; kustomize's are a component (below). The
    // chart's MachineClasses are kustomize's manifests/machineclasses/, applied after the CRDs.
    // `helm template` renders for a Kubernetes 1.28+ by default, so with matchConditions: the
    // base with its match-conditions component; the plain base is what older servers get.
    let classes = objects(&kustomize(&repo("manifests/machineclasses")));
    let with_classes = |mut base: BTreeMap<String, Value>| {
        base.extend(classes.clone());
        base
    };
    assert_same(
        &objects(&helm_template(
            &[],
            &["--set", "networkPolicy.enabled=false"],
        )),
        &with_classes(objects(&kustomize_for_1_28())),
    );
    let components = values_file("components", COMPONENTS);
    assert_same(
        &objects(&helm_template(&[&components], &[])),
        &with_classes(objects(&kustomize_with_components())),
    );
    assert_same(
        &objects(&helm_template(
            &[],
            &[
                "--set",
                "networkPolicy.enabled=false",
                "--set",
                "machineClasses=null",
                "--kube-version",
                "1.27.0",
            ],
        )),
        &objects(&kustomize(&repo("manifests"))),
    );
}

#[test]
fn the_chart_ships_the_generated_crds() {
    assert_eq!(
        std::fs::read_to_string(chart_dir().join("files/crds/crds.yaml")).expect("chart CRDs"),
        std::fs::read_to_string(repo("manifests/crds.yaml")).expect("manifests/crds.yaml"),
        "copy manifests/crds.yaml to charts/kubevirt-operator/files/crds/crds.yaml"
    );
}

/// Kinds kubernetes-validate has no schema for: custom resources of other projects, and our own
/// MachineClasses (checked by the operator's own rules: tests/machine_class_manifests.rs).
const FOREIGN_KINDS: &[&str] = &[
    "ServiceMonitor",
    "PrometheusRule",
    "Certificate",
    "Issuer",
    "MachineClass",
];

#[test]
fn rendered_objects_pass_kubernetes_validate_strict_for_1_30_and_1_33() {
    let dir = repo("target/kubernetes-validate");
    std::fs::create_dir_all(&dir).expect("dir");
    let all = values_file("all-toggles", ALL_TOGGLES);
    let renderings = [
        ("chart-defaults.yaml", helm_template(&[], &[])),
        ("chart-all-toggles.yaml", helm_template(&[&all], &[])),
        ("kustomize.yaml", kustomize(&repo("manifests"))),
        ("kustomize-components.yaml", kustomize_with_components()),
    ];
    for (file, yaml) in &renderings {
        std::fs::write(dir.join(file), yaml).expect("write rendering");
    }
    for version in ["1.30.0", "1.33.0"] {
        let mut cmd = tool("kubernetes-validate");
        cmd.args(["--strict", "--quiet", "-k", version])
            .args(renderings.iter().map(|(f, _)| dir.join(f)));
        let out = cmd.output().expect("kubernetes-validate");
        assert!(out.status.success(), "{version}: {}", text(&out));
        let report = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        for line in report.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                line.starts_with("WARN")
                    && line.contains("Couldn't find schema for kind")
                    && FOREIGN_KINDS
                        .iter()
                        .any(|k| line.contains(&format!("kind {k} with"))),
                "{version}: only foreign custom resources may go unchecked: {line}"
            );
        }
    }
    // A strict validation does catch a stray field (the tool is not a no-op here).
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {bogus: 1}\n",
    )
    .expect("write");
    let out = tool("kubernetes-validate")
        .args(["--strict", "--quiet", "-k", "1.33.0"])
        .arg(&bad)
        .output()
        .expect("kubernetes-validate");
    assert!(!out.status.success(), "{}", text(&out));
}

#[test]
fn the_deployment_has_no_traps() {
    for rendered in [helm_template(&[], &[]), kustomize(&repo("manifests"))] {
        let objs = docs(&rendered);
        let d = one(&objs, "Deployment");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            c["image"],
            format!(
                "ghcr.io/vitistack/kubevirt-operator-rs:{}",
                env!("CARGO_PKG_VERSION")
            ),
            "the image built from this repository, tagged with the crate version"
        );
        assert!(
            c["resources"]["limits"].get("cpu").is_none(),
            "no CPU limit (CFS throttling of tokio's workers)"
        );
        assert_eq!(c["resources"]["limits"]["memory"], "512Mi");
        let drain = env(d, "DRAIN_PERIOD").expect("DRAIN_PERIOD");
        let drain = kubevirt_operator::config::parse_duration(&drain).expect("a duration");
        let grace = d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .expect("terminationGracePeriodSeconds");
        assert!(grace > drain.as_secs(), "grace {grace}s > drain {drain:?}");
        // The webhook Service is named in the env, and metrics have a Service of their own.
        let services: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Service").collect();
        let webhook = env(d, "WEBHOOK_SERVICE_NAME").expect("WEBHOOK_SERVICE_NAME");
        let ports = |name: &str| -> Vec<String> {
            services
                .iter()
                .find(|s| s["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("Service {name}"))["spec"]["ports"]
                .as_array()
                .expect("ports")
                .iter()
                .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        assert_eq!(ports(&webhook), ["webhook"]);
        assert_eq!(ports("kubevirt-operator-metrics"), ["metrics"]);
    }
    let kustomization = std::fs::read_to_string(repo("manifests/kustomization.yaml")).expect("k");
    assert!(
        kustomization.contains(&format!("newTag: {}", env!("CARGO_PKG_VERSION"))),
        "the images: entry pins the crate version"
    );
    let chart: Value = serde_yaml::from_str(
        &std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("Chart.yaml"),
    )
    .expect("Chart.yaml");
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
}

/// A kustomize namePrefix renames the Service, the webhook configurations and the values the
/// operator is told alike; so does the chart's `webhook.serviceName` for the Service.
#[test]
fn the_webhook_service_name_follows_renames() {
    let prefixed = kustomize(&overlay(
        "name-prefix",
        "resources: [../../../manifests]\ncomponents: [../../../manifests/subresources]\nnamePrefix: team-\n",
    ));
    let objs = docs(&prefixed);
    // The APIService keeps the name its API group fixes and calls the renamed Service.
    let api_service = one(&objs, "APIService");
    assert_eq!(
        api_service["metadata"]["name"],
        "v1alpha1.subresources.vitistack.io"
    );
    assert_eq!(
        api_service["spec"]["service"]["name"],
        "team-kubevirt-operator-webhook"
    );
    let d = one(&objs, "Deployment");
    assert_eq!(
        env(d, "WEBHOOK_SERVICE_NAME").as_deref(),
        Some("team-kubevirt-operator-webhook")
    );
    assert!(objs.iter().any(
        |o| o["kind"] == "Service" && o["metadata"]["name"] == "team-kubevirt-operator-webhook"
    ));
    // The webhook configurations, the name the operator fills and its right to them, alike.
    assert_eq!(
        env(d, "WEBHOOK_CONFIGURATION_NAME").as_deref(),
        Some("team-kubevirt-operator")
    );
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let c = one(&objs, kind);
        assert_eq!(c["metadata"]["name"], "team-kubevirt-operator");
        assert_eq!(
            c["webhooks"][0]["clientConfig"]["service"]["name"],
            "team-kubevirt-operator-webhook"
        );
    }
    let role = objs
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "team-kubevirt-operator")
        .expect("the ClusterRole");
    assert!(
        role["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["resources"][0] == "mutatingwebhookconfigurations"
                && r["resourceNames"] == json!(["team-kubevirt-operator"])),
        "{role}"
    );
    let objs = docs(&helm_template(&[], &["--set", "webhook.serviceName=hooks"]));
    assert_eq!(
        env(one(&objs, "Deployment"), "WEBHOOK_SERVICE_NAME").as_deref(),
        Some("hooks")
    );
    assert!(
        objs.iter()
            .any(|o| o["kind"] == "Service" && o["metadata"]["name"] == "hooks")
    );
    let objs = docs(&chart::run({
        let mut cmd = tool("helm");
        cmd.args(["template", "edge"])
            .arg(chart_dir())
            .args(["-n", NAMESPACE]);
        cmd
    }));
    assert_eq!(
        env(one(&objs, "Deployment"), "WEBHOOK_SERVICE_NAME").as_deref(),
        Some("edge-kubevirt-operator-webhook"),
        "another release name renames the Service and the setting together"
    );
}
