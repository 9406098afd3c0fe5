//! The aggregated API in the chart (issue 34): off by default; on, the APIService points at the
//! port the operator serves it on, the operator holds the APIService by name only (none in
//! cert-manager mode, where cainjector fills it), KubeVirt's power subresources per watched
//! namespace when scoped, and the users' ClusterRoles aggregate into admin/edit only when asked.

mod chart;

use chart::{NAMESPACE, docs, env, helm_template, named, one, tool, values_file};
use kubevirt_operator::certs::api_service::NAME;
use serde_json::{Value, json};

/// `values` in a file of their own (the tests run in parallel).
fn render(values: &str) -> Vec<Value> {
    let name = format!("subresources-{:016x}", {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        values.hash(&mut h);
        h.finish()
    });
    let file = values_file(&name, values);
    docs(&helm_template(&[file.as_path()], &[]))
        .into_iter()
        .filter(|o| o["metadata"]["annotations"]["helm.sh/hook"].is_null())
        .collect()
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn aggregation(role: &Value) -> Vec<String> {
    let labels = role["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels
        .into_iter()
        .filter(|(_, v)| v == "true")
        .filter_map(|(k, _)| {
            k.strip_prefix("rbac.authorization.k8s.io/aggregate-to-")
                .map(str::to_owned)
        })
        .collect()
}

fn rules(o: &Value) -> Vec<Value> {
    o["rules"].as_array().cloned().unwrap_or_default()
}

fn vmi_power() -> Value {
    json!({
        "apiGroups": ["subresources.kubevirt.io"],
        "resources": ["virtualmachineinstances/pause", "virtualmachineinstances/unpause", "virtualmachineinstances/softreboot", "virtualmachines/stop"],
        "verbs": ["update"],
    })
}

fn vmi_console() -> Value {
    json!({
        "apiGroups": ["subresources.kubevirt.io"],
        "resources": ["virtualmachineinstances/console", "virtualmachineinstances/vnc"],
        "verbs": ["get"],
    })
}

#[test]
fn off_by_default_nothing_of_the_aggregated_api_is_installed() {
    let objs = render("{}\n");
    assert!(objs.iter().all(|o| o["kind"] != "APIService"));
    assert!(find(&objs, "ClusterRole", "kubevirt-operator-machine-power").is_none());
    assert!(find(&objs, "ClusterRole", "kubevirt-operator-subresources").is_none());
    let deployment = one(&objs, "Deployment");
    assert_eq!(env(deployment, "SUBRESOURCES_BIND_ADDRESS"), None);
    let service = named(&objs, "Service", "kubevirt-operator-webhook");
    assert_eq!(service["spec"]["ports"].as_array().map(Vec::len), Some(1));
}

#[test]
fn on_the_api_service_reaches_the_operators_listener_through_the_webhook_service() {
    let objs = render("subresources: {enabled: true}\nwebhook: {serviceName: custom-webhook}\n");
    let api = one(&objs, "APIService");
    assert_eq!(api["metadata"]["name"], NAME);
    assert_eq!(api["spec"]["group"], "subresources.vitistack.io");
    assert_eq!(api["spec"]["version"], "v1alpha1");
    assert!(api["spec"]["caBundle"].is_null(), "the operator fills it");
    assert!(api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].is_null());
    let svc = &api["spec"]["service"];
    assert_eq!(svc["name"], "custom-webhook");
    assert_eq!(svc["namespace"], NAMESPACE);
    // Service port -> container port -> the operator's listen address.
    let service = named(&objs, "Service", "custom-webhook");
    let port = service["spec"]["ports"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["port"] == svc["port"]))
        .unwrap_or_else(|| panic!("no port {} on {service}", svc["port"]));
    let deployment = one(&objs, "Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let target = container["ports"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == port["targetPort"]))
        .unwrap_or_else(|| panic!("no container port {}", port["targetPort"]));
    let listen = env(deployment, "SUBRESOURCES_BIND_ADDRESS").expect("the listener is on");
    assert_eq!(listen, format!(":{}", target["containerPort"]));
    // The webhook NetworkPolicy lets kube-apiserver reach it as it reaches the webhooks.
    let policy = named(&objs, "NetworkPolicy", "kubevirt-operator-webhook");
    let ports = policy["spec"]["ingress"][0]["ports"].to_string();
    assert!(ports.contains(r#""port":"subresources""#), "{ports}");

    // The operator: the APIService by name, KubeVirt's power subresources, kube-system's reader.
    let role = named(&objs, "ClusterRole", "kubevirt-operator-subresources");
    assert_eq!(
        rules(role),
        [
            json!({"apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"],
                   "resourceNames": [NAME], "verbs": ["get", "list", "watch", "update"]}),
            vmi_power(),
            vmi_console(),
        ]
    );
    let reader = named(&objs, "RoleBinding", "kubevirt-operator-front-proxy-ca");
    assert_eq!(reader["metadata"]["namespace"], "kube-system");
    assert_eq!(
        reader["roleRef"]["name"],
        "extension-apiserver-authentication-reader"
    );

    // The users' roles: not aggregated unless asked.
    let power = named(&objs, "ClusterRole", "kubevirt-operator-machine-power");
    let console = named(&objs, "ClusterRole", "kubevirt-operator-machine-console");
    assert!(aggregation(power).is_empty() && aggregation(console).is_empty());
    assert_eq!(
        rules(power)[0]["resources"],
        json!([
            "machines/pause",
            "machines/unpause",
            "machines/softreboot",
            "machines/stop",
            "machines/forcestop",
            "machines/start",
            "machines/restart"
        ])
    );
    assert_eq!(
        rules(power)[0]["apiGroups"],
        json!(["subresources.vitistack.io"])
    );
    assert_eq!(
        rules(console),
        [json!({"apiGroups": ["subresources.vitistack.io"],
                "resources": ["machines/console", "machines/vnc"], "verbs": ["get"]})]
    );
}

#[test]
fn the_users_roles_aggregate_into_the_roles_named_and_no_other() {
    for (values, want) in [
        (
            "subresources: {enabled: true, aggregateTo: [admin]}\n",
            vec!["admin"],
        ),
        (
            "subresources: {enabled: true, aggregateTo: [admin, edit]}\n",
            vec!["admin", "edit"],
        ),
    ] {
        let objs = render(values);
        for name in [
            "kubevirt-operator-machine-power",
            "kubevirt-operator-machine-console",
        ] {
            assert_eq!(
                aggregation(named(&objs, "ClusterRole", name)),
                want,
                "{values}"
            );
        }
    }
    // `view` (or anything else) is refused by the schema: read-only holders get no buttons.
    let file = values_file(
        "subresources-view",
        "subresources: {enabled: true, aggregateTo: [view]}\n",
    );
    let out = tool("helm")
        .args(["template", "x"])
        .arg(chart::chart_dir())
        .arg("-f")
        .arg(&file)
        .output()
        .expect("helm");
    assert!(!out.status.success(), "{}", chart::text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("aggregateTo"));
}

#[test]
fn scoped_and_cert_manager_installs_narrow_the_operators_rights() {
    let objs = render(
        "subresources: {enabled: true}\nwatchNamespaces: [team-a, team-b]\ncertificates: {mode: cert-manager}\n",
    );
    let api = one(&objs, "APIService");
    assert_eq!(
        api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!("{NAMESPACE}/kubevirt-operator-webhook-cert")
    );
    // No APIService right (cainjector fills it), no cluster-wide VMI right.
    let role = named(&objs, "ClusterRole", "kubevirt-operator-subresources");
    assert!(rules(role).is_empty(), "{role}");
    for ns in ["team-a", "team-b"] {
        let r = objs
            .iter()
            .find(|o| {
                o["kind"] == "Role"
                    && o["metadata"]["name"] == "kubevirt-operator-subresources"
                    && o["metadata"]["namespace"] == ns
            })
            .unwrap_or_else(|| panic!("no Role in {ns}"));
        assert_eq!(rules(r), [vmi_power(), vmi_console()]);
    }
}
