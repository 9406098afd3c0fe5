//! What the chart's values tell the operator, rendered by the real `helm template`: the admin's
//! allow-lists (bridges, VLANs, machine types), client authentication for the webhooks, and the
//! NetworkPolicies in front of the operator's ports (with the install notes `helm install` prints).

mod chart;

use chart::{ALL_TOGGLES, docs, env, helm_notes, helm_template, kustomize, one, values_file};
use serde_json::{Value, json};

/// Issue 25: the admin's lists reach the operator from the chart and the manifests alike, and
/// allow no bridge, untagged traffic and KubeVirt's default machine types until set.
#[test]
fn the_admins_allow_lists_reach_the_operator() {
    let lists = |objs: &[Value]| {
        let d = one(objs, "Deployment");
        ["ALLOWED_BRIDGES", "ALLOWED_VLANS", "ALLOWED_MACHINE_TYPES"].map(|n| env(d, n))
    };
    let defaults = [Some(""), Some("0"), Some("q35*,pc-q35*")].map(|v| v.map(str::to_owned));
    assert_eq!(lists(&docs(&helm_template(&[], &[]))), defaults);
    assert_eq!(
        lists(&docs(&kustomize(&chart::repo("manifests")))),
        defaults
    );
    let set = helm_template(
        &[],
        &[
            "--set",
            "allowedBridges={br-vms,br-prod}",
            "--set-string",
            "allowedVlans=0\\,100-199\\,300",
            "--set-string",
            "allowedMachineTypes=q35*\\,pc-q35-rhel9*",
        ],
    );
    assert_eq!(
        lists(&docs(&set)),
        [
            Some("br-vms,br-prod"),
            Some("0,100-199,300"),
            Some("q35*,pc-q35-rhel9*")
        ]
        .map(|v| v.map(str::to_owned))
    );
}

/// Issue 33: `nodeUnreachableGrace` reaches the operator as NODE_UNREACHABLE_GRACE; at its
/// default the operator's own default (60s) stands (tests/chart_schema.rs refuses a non-duration).
#[test]
fn the_node_unreachable_grace_reaches_the_operator_only_when_changed() {
    let plain = docs(&helm_template(&[], &[]));
    assert_eq!(
        env(one(&plain, "Deployment"), "NODE_UNREACHABLE_GRACE"),
        None
    );
    let set = docs(&helm_template(&[], &["--set", "nodeUnreachableGrace=5m"]));
    assert_eq!(
        env(one(&set, "Deployment"), "NODE_UNREACHABLE_GRACE").as_deref(),
        Some("5m")
    );
}

/// Issue 33: the restart budget's values reach the operator (as the kustomize manifests set
/// them: 10 at once, no per-namespace limit, 10m).
#[test]
fn the_restart_budget_reaches_the_operator() {
    let names = [
        "MAX_CONCURRENT_RESTARTS",
        "MAX_CONCURRENT_RESTARTS_PER_NAMESPACE",
        "RESTART_TIMEOUT",
    ];
    let plain = docs(&helm_template(&[], &[]));
    let got = names.map(|n| env(one(&plain, "Deployment"), n));
    assert_eq!(got, ["10", "0", "10m"].map(|v| Some(v.to_owned())));
    let set = docs(&helm_template(
        &[],
        &[
            "--set",
            "restarts.maxConcurrent=3,restarts.maxConcurrentPerNamespace=1,restarts.timeout=5m",
        ],
    ));
    let got = names.map(|n| env(one(&set, "Deployment"), n));
    assert_eq!(got, ["3", "1", "5m"].map(|v| Some(v.to_owned())));
}

/// Issue 33: `orphanCheckInterval` reaches the operator as ORPHAN_CHECK_INTERVAL (10m, as the
/// kustomize manifests set it).
#[test]
fn the_orphan_check_interval_reaches_the_operator() {
    let plain = docs(&helm_template(&[], &[]));
    assert_eq!(
        env(one(&plain, "Deployment"), "ORPHAN_CHECK_INTERVAL").as_deref(),
        Some("10m")
    );
    let set = docs(&helm_template(&[], &["--set", "orphanCheckInterval=0s"]));
    assert_eq!(
        env(one(&set, "Deployment"), "ORPHAN_CHECK_INTERVAL").as_deref(),
        Some("0s")
    );
}

/// Issue 32: `snapshots.restorePauseImage` (a mirror, for air-gapped clusters) reaches the
/// operator as RESTORE_PAUSE_IMAGE; at its default the operator's own default stands.
#[test]
fn the_restore_pause_image_reaches_the_operator_only_when_changed() {
    let plain = docs(&helm_template(&[], &[]));
    assert_eq!(env(one(&plain, "Deployment"), "RESTORE_PAUSE_IMAGE"), None);
    let mirror = "mirror.example.com:5000/k8s/pause:3.10";
    let set = docs(&helm_template(
        &[],
        &["--set", &format!("snapshots.restorePauseImage={mirror}")],
    ));
    assert_eq!(
        env(one(&set, "Deployment"), "RESTORE_PAUSE_IMAGE").as_deref(),
        Some(mirror)
    );
}

/// `webhook.clientCAConfigMap`: the CA is mounted and CLIENT_CA_FILE names it; unset, neither.
#[test]
fn the_client_ca_reaches_the_operator_only_when_set() {
    let plain = docs(&helm_template(&[], &[]));
    let d = one(&plain, "Deployment");
    assert_eq!(env(d, "CLIENT_CA_FILE"), None);
    assert!(!d.to_string().contains("client-ca"), "{d}");
    for certs in [&[][..], &["--set", "certificates.mode=cert-manager"][..]] {
        let mut args = vec!["--set", "webhook.clientCAConfigMap=apiserver-client-ca"];
        args.extend_from_slice(certs);
        let set = docs(&helm_template(&[], &args));
        let d = one(&set, "Deployment");
        assert_eq!(
            env(d, "CLIENT_CA_FILE").as_deref(),
            Some("/client-ca/ca.crt")
        );
        let pod = &d["spec"]["template"]["spec"];
        let volume = pod["volumes"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == "client-ca"))
            .unwrap_or_else(|| panic!("a client-ca volume: {pod}"));
        assert_eq!(volume["configMap"]["name"], "apiserver-client-ca");
        let mounts = pod["containers"][0]["volumeMounts"].to_string();
        assert!(mounts.contains("/client-ca"), "{mounts}");
    }
}

/// The NetworkPolicies among `objs`, by name.
fn policies(objs: &[Value]) -> std::collections::BTreeMap<String, Value> {
    objs.iter()
        .filter(|o| o["kind"] == "NetworkPolicy")
        .map(|o| {
            (
                o["metadata"]["name"].as_str().expect("name").to_owned(),
                o.clone(),
            )
        })
        .collect()
}

/// Every policy selects the operator's pods and restricts ingress only; every rule names the
/// ports it opens (a rule without ports opens them all), and none is the probes port, by name or
/// number: only the kubelet, from the node, reaches it.
fn assert_probes_closed(objs: &[Value]) {
    let pod = &one(objs, "Deployment")["spec"]["template"];
    let probes = pod["spec"]["containers"][0]["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == "probes"))
        .expect("the probes port")["containerPort"]
        .clone();
    for (name, policy) in policies(objs) {
        assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]), "{name}");
        for (key, value) in policy["spec"]["podSelector"]["matchLabels"]
            .as_object()
            .expect("matchLabels")
        {
            assert_eq!(
                &pod["metadata"]["labels"][key], value,
                "{name} selects the pods"
            );
        }
        for rule in policy["spec"]["ingress"].as_array().expect("ingress rules") {
            let ports = rule["ports"].as_array().filter(|p| !p.is_empty());
            let ports = ports.unwrap_or_else(|| panic!("{name}: a rule opens every port: {rule}"));
            for port in ports {
                assert!(
                    port["port"] != "probes" && port["port"] != probes,
                    "{name} opens the probes port: {rule}"
                );
            }
        }
    }
}

/// The webhook rule's sources (absent: any) and the metrics rule, of the default release.
fn webhook_and_metrics_rules(objs: &[Value]) -> (Value, Value) {
    let policies = policies(objs);
    let names: Vec<&String> = policies.keys().collect();
    assert_eq!(
        names,
        ["kubevirt-operator-metrics", "kubevirt-operator-webhook"],
        "one policy per open port"
    );
    let rule = |name: &str, port: &str| {
        let rules = policies[name]["spec"]["ingress"]
            .as_array()
            .expect("rules")
            .clone();
        assert_eq!(rules.len(), 1, "{name}: {rules:?}");
        assert_eq!(
            rules[0]["ports"],
            json!([{"protocol": "TCP", "port": port}]),
            "{name}"
        );
        rules[0].clone()
    };
    (
        rule("kubevirt-operator-webhook", "webhook")["from"].clone(),
        rule("kubevirt-operator-metrics", "metrics"),
    )
}

/// NetworkPolicies are on by default: the webhook port open to any source (kube-apiserver's
/// addresses are not known) with a warning in the notes, the metrics port to Prometheus only,
/// the probes port to no pod.
#[test]
fn network_policies_are_on_by_default_and_the_notes_warn_while_the_webhook_is_open() {
    let objs = docs(&helm_template(&[], &[]));
    let (webhook_from, metrics) = webhook_and_metrics_rules(&objs);
    assert_eq!(
        webhook_from,
        Value::Null,
        "any source while apiServerCIDRs is empty"
    );
    assert_eq!(
        metrics["from"],
        json!([{"namespaceSelector": {},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}])
    );
    assert_probes_closed(&objs);
    let notes = helm_notes(&[]);
    for part in [
        "WARNING: networkPolicy.apiServerCIDRs is empty",
        "kubectl get endpoints kubernetes -n default",
        "webhook.clientCAConfigMap",
    ] {
        assert!(
            notes.contains(part),
            "{part:?} missing from the notes:\n{notes}"
        );
    }
    let with_ca = helm_notes(&["--set", "webhook.clientCAConfigMap=apiserver-client-ca"]);
    assert!(with_ca.contains("WARNING"), "{with_ca}");
    assert!(
        !with_ca.contains("Also consider webhook.clientCAConfigMap"),
        "{with_ca}"
    );
}

/// `apiServerCIDRs` restricts the webhook port to those addresses, and the notes stop warning.
#[test]
fn api_server_cidrs_restrict_the_webhook_port() {
    let set = [
        "--set",
        "networkPolicy.apiServerCIDRs={10.0.0.10/32,2001:db8::/64}",
    ];
    let objs = docs(&helm_template(&[], &set));
    let (webhook_from, _) = webhook_and_metrics_rules(&objs);
    assert_eq!(
        webhook_from,
        json!([{"ipBlock": {"cidr": "10.0.0.10/32"}}, {"ipBlock": {"cidr": "2001:db8::/64"}}])
    );
    assert_probes_closed(&objs);
    let notes = helm_notes(&set);
    assert!(!notes.contains("WARNING"), "{notes}");
    // Every toggle on (a release with another Service name and its own CIDRs): still closed.
    let all = values_file("all-toggles", ALL_TOGGLES);
    assert_probes_closed(&docs(&helm_template(&[&all], &[])));
}

#[test]
fn disabled_network_policies_render_none_and_the_notes_say_so() {
    let set = ["--set", "networkPolicy.enabled=false"];
    let objs = docs(&helm_template(&[], &set));
    assert!(policies(&objs).is_empty(), "{:?}", policies(&objs));
    let notes = helm_notes(&set);
    assert!(notes.contains("NetworkPolicies are off"), "{notes}");
    assert!(!notes.contains("WARNING"), "{notes}");
}
