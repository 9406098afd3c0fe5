//! The chart's RBAC by scope: the operator's own webhook configurations, certificate objects and
//! the Machine CRD by name, no cluster-wide namespaced rights in namespace-scoped mode, and CDI's clone right
//! bound only where `cloneSourceNamespaces` lists.

mod chart;

use chart::{docs, env, helm_template, named, one};
use serde_json::{Value, json};

/// The release's objects, without the `helm test` hooks (their Role is checked apart).
fn objects(yaml: &str) -> Vec<Value> {
    docs(yaml)
        .into_iter()
        .filter(|o| o["metadata"]["annotations"]["helm.sh/hook"].is_null())
        .collect()
}

fn rules_of(o: &Value) -> Vec<Value> {
    o["rules"].as_array().cloned().unwrap_or_default()
}

/// RBAC by scope: the operator's own webhook configurations and certificate objects by name
/// (only `create` unnamed), and in namespace-scoped mode no cluster-wide namespaced rights.
#[test]
fn rbac_is_scoped_by_name_and_namespace() {
    let objs = objects(&helm_template(&[], &[]));
    let cluster_role = named(&objs, "ClusterRole", "kubevirt-operator");
    let mut crd_rules = 0;
    let mut webhook_rules = 0;
    for rule in rules_of(cluster_role) {
        if rule["apiGroups"][0] == "apiextensions.k8s.io" {
            // Only the Machine CRD, only read (the status schema check at leader start).
            assert_eq!(
                rule["resources"],
                json!(["customresourcedefinitions"]),
                "{rule}"
            );
            assert_eq!(
                rule["resourceNames"],
                json!(["machines.vitistack.io"]),
                "{rule}"
            );
            assert_eq!(rule["verbs"], json!(["get"]), "{rule}");
            crd_rules += 1;
        }
        if rule["apiGroups"][0] == "admissionregistration.k8s.io" {
            // Issue 24: the chart installs the webhook configurations; the operator only fills
            // their caBundle: these two by name, and no create (which cannot be named).
            assert_eq!(
                rule["verbs"],
                json!(["get", "list", "watch", "update"]),
                "{rule}"
            );
            assert_eq!(
                rule["resourceNames"],
                json!(["kubevirt-operator"]),
                "{rule}"
            );
            webhook_rules += 1;
        }
    }
    assert_eq!(crd_rules, 1, "the Machine CRD is readable by name");
    assert_eq!(webhook_rules, 1, "{cluster_role}");
    // cert-manager mode: no right on webhook configurations at all.
    let cm = objects(&helm_template(
        &[],
        &["--set", "certificates.mode=cert-manager"],
    ));
    assert!(
        !named(&cm, "ClusterRole", "kubevirt-operator")
            .to_string()
            .contains("webhookconfigurations")
    );
    let scoped = objects(&helm_template(
        &[],
        &["--set", "watchNamespaces={team-a,team-b}"],
    ));
    let cluster_role = named(&scoped, "ClusterRole", "kubevirt-operator");
    let cluster_resources: Vec<String> = rules_of(cluster_role)
        .iter()
        .flat_map(|r| r["resources"].as_array().cloned().unwrap_or_default())
        .map(|r| r.as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        cluster_resources,
        [
            "machineclasses",
            "storageclasses",
            "storageprofiles",
            // Issue 35: KubeVirt's install resource, for disk hot-plug; list and watch only.
            "kubevirts",
            // Issue 33: Nodes' Ready condition (NodeUnreachable); list and watch only.
            "nodes",
            // Namespaced, but read by name wherever a Machine's dataSource points (golden
            // images live outside the watched namespaces); `get` only.
            "datasources",
            "subjectaccessreviews",
            "customresourcedefinitions",
            // Issue 22: remote clusters, cluster-scoped; their status written.
            "kubevirtconfigs",
            "kubevirtconfigs/status",
            // Issue 31: a KubevirtConfig's namespaceSelector, read by name; `get` only.
            "namespaces",
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations"
        ],
        "only cluster-scoped objects cluster-wide"
    );
    let unscoped_machines_rules = rules_of(named(&objs, "ClusterRole", "kubevirt-operator"))
        .into_iter()
        .filter(|r| {
            r["apiGroups"][0] != "admissionregistration.k8s.io"
                && r["resources"][0] != "storageclasses"
                && r["resources"][0] != "storageprofiles"
                && r["resources"][0] != "kubevirts"
                && r["resources"][0] != "nodes"
                && r["resources"][0] != "machineclasses"
                && r["resources"][0] != "datasources"
                && r["resources"][0] != "subjectaccessreviews"
                && r["resources"][0] != "customresourcedefinitions"
                && r["resources"][0] != "kubevirtconfigs"
                && r["resources"][0] != "kubevirtconfigs/status"
                && r["resources"][0] != "namespaces"
        })
        .collect::<Vec<_>>();
    for ns in ["team-a", "team-b"] {
        let role = scoped
            .iter()
            .find(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == ns)
            .unwrap_or_else(|| panic!("a Role in {ns}"));
        assert_eq!(rules_of(role), unscoped_machines_rules, "{ns}");
        assert!(scoped.iter().any(|o| o["kind"] == "RoleBinding"
            && o["metadata"]["namespace"] == ns
            && o["subjects"][0]["name"] == "kubevirt-operator-controller-manager"));
    }
    let d = one(&scoped, "Deployment");
    assert_eq!(env(d, "WATCH_NAMESPACES").as_deref(), Some("team-a,team-b"));
}

/// KubevirtConfigs' kubeconfig Secrets (issue 22): list and watch of Secrets (each config's
/// one Secret is watched by a field selector), in the release namespace and in each namespace
/// `kubevirtConfigSecretNamespaces` lists, by a Role, never cluster-wide; the ClusterRole keeps
/// Secrets unlisted.
#[test]
fn kubevirt_config_secrets_are_readable_only_where_listed() {
    let secret_roles = |objs: &[Value]| -> Vec<String> {
        objs.iter()
            .filter(|o| o["metadata"]["name"] == "kubevirt-operator-kubevirt-configs")
            .filter(|o| o["kind"] == "Role")
            .map(|o| {
                assert_eq!(
                    rules_of(o),
                    [json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]})]
                );
                o["metadata"]["namespace"].as_str().unwrap_or_default().to_owned()
            })
            .collect()
    };
    let bound = |objs: &[Value]| -> Vec<String> {
        objs.iter()
            .filter(|o| o["roleRef"]["name"] == "kubevirt-operator-kubevirt-configs")
            .map(|o| {
                assert_eq!(
                    (o["kind"].as_str(), o["roleRef"]["kind"].as_str()),
                    (Some("RoleBinding"), Some("Role"))
                );
                assert_eq!(
                    o["subjects"][0]["name"],
                    "kubevirt-operator-controller-manager"
                );
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    };
    let defaults = objects(&helm_template(&[], &[]));
    assert_eq!(secret_roles(&defaults), ["kubevirt-operator-system"]);
    assert_eq!(bound(&defaults), ["kubevirt-operator-system"]);
    for rule in rules_of(named(&defaults, "ClusterRole", "kubevirt-operator")) {
        if rule["resources"][0] == "secrets" {
            let verbs = rule["verbs"].to_string();
            assert!(
                !verbs.contains("list") && !verbs.contains("watch"),
                "{rule}"
            );
        }
    }
    let listed = objects(&helm_template(
        &[],
        &[
            "--set",
            "kubevirtConfigSecretNamespaces={ops,kubevirt-operator-system}",
        ],
    ));
    assert_eq!(secret_roles(&listed), ["kubevirt-operator-system", "ops"]);
    assert_eq!(bound(&listed), ["kubevirt-operator-system", "ops"]);
    let d = one(&listed, "Deployment");
    assert_eq!(env(d, "DEFAULT_KUBEVIRT_CONFIG"), None);
    assert_eq!(
        env(d, "NEW_OWNERSHIP_KEY"),
        None,
        "a lost key is never replaced by default"
    );
    assert_eq!(
        env(d, "KUBEVIRT_CONFIG_PROBE_INTERVAL"),
        None,
        "the default is the operator's"
    );
    let set = objects(&helm_template(
        &[],
        &[
            "--set",
            "defaultKubevirtConfig=dc1",
            "--set",
            "kubevirtConfigProbeInterval=10s",
            "--set",
            "newOwnershipKey=true",
        ],
    ));
    let d = one(&set, "Deployment");
    assert_eq!(env(d, "DEFAULT_KUBEVIRT_CONFIG").as_deref(), Some("dc1"));
    assert_eq!(env(d, "NEW_OWNERSHIP_KEY").as_deref(), Some("true"));
    assert_eq!(
        env(d, "KUBEVIRT_CONFIG_PROBE_INTERVAL").as_deref(),
        Some("10s")
    );
}

/// CDI's clone right: a ClusterRole bound to nobody by default, and bound to the operator in each
/// namespace `cloneSourceNamespaces` lists, nowhere else.
#[test]
fn the_clone_right_is_bound_only_where_listed() {
    let role =
        |objs: &[Value]| rules_of(named(objs, "ClusterRole", "kubevirt-operator-clone-source"));
    let bindings = |objs: &[Value]| -> Vec<(String, String)> {
        objs.iter()
            .filter(|o| o["roleRef"]["name"] == "kubevirt-operator-clone-source")
            .map(|o| {
                assert_eq!(o["kind"], "RoleBinding", "never cluster-wide: {o}");
                assert_eq!(
                    o["subjects"][0]["name"],
                    "kubevirt-operator-controller-manager"
                );
                let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
                (
                    ns.to_owned(),
                    o["roleRef"]["kind"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let defaults = objects(&helm_template(&[], &[]));
    assert_eq!(
        role(&defaults),
        [
            json!({"apiGroups": ["cdi.kubevirt.io"], "resources": ["datavolumes/source"], "verbs": ["create"]})
        ]
    );
    assert!(bindings(&defaults).is_empty(), "bound to nobody by default");
    let listed = objects(&helm_template(
        &[],
        &["--set", "cloneSourceNamespaces={os-images,media}"],
    ));
    assert_eq!(
        bindings(&listed),
        [
            ("os-images".to_owned(), "ClusterRole".to_owned()),
            ("media".to_owned(), "ClusterRole".to_owned())
        ]
    );
}

/// `helm test`'s ServiceAccount may create Machines in the one namespace it checks, nothing else;
/// its objects are hooks, made only while `helm test` runs.
#[test]
fn the_test_hook_may_only_create_machines_where_it_checks() {
    for (args, ns) in [
        (vec![], "kubevirt-operator-system"),
        (vec!["--set", "watchNamespaces={team-a,team-b}"], "team-a"),
    ] {
        let all = docs(&helm_template(&[], &args));
        let hooks: Vec<&Value> = all
            .iter()
            .filter(|o| o["metadata"]["annotations"]["helm.sh/hook"] == "test")
            .collect();
        let kinds: Vec<&str> = hooks.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(kinds, ["ServiceAccount", "Role", "RoleBinding", "Pod"]);
        let role = hooks[1];
        assert_eq!(role["metadata"]["namespace"], ns);
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": ["vitistack.io"], "resources": ["machines"], "verbs": ["create"]}])
        );
        let pod = hooks[3];
        assert_eq!(
            pod["spec"]["containers"][0]["args"],
            json!(["check-admission", "--namespace", ns])
        );
        assert_eq!(pod["spec"]["serviceAccountName"], "kubevirt-operator-test");
    }
    let off = docs(&helm_template(&[], &["--set", "tests.enabled=false"]));
    // The MachineClasses are post-install hooks (their CRD is a template of the release).
    let hooks: Vec<&str> = off
        .iter()
        .filter(|o| !o["metadata"]["annotations"]["helm.sh/hook"].is_null())
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(hooks, ["MachineClass"; 3]);
}

/// Issue 31: `use` on a KubevirtConfig is the admin's to grant, per cluster: no role the chart
/// renders or `manifests/rbac/` holds grants it (or any verb `*`), none aggregates into `admin` or `edit`; and Namespaces
/// are only read by name, for a KubevirtConfig's `namespaceSelector`.
#[test]
fn the_chart_grants_no_placement_and_only_gets_namespaces() {
    let objs = objects(&helm_template(&[], &[]));
    let mut manifests = Vec::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/rbac");
    for file in std::fs::read_dir(dir).expect("manifests/rbac") {
        let text = std::fs::read_to_string(file.expect("entry").path()).expect("read");
        manifests.extend(docs(&text));
    }
    for o in objs.iter().chain(&manifests) {
        let labels = o["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(
            !labels
                .keys()
                .any(|k| k.starts_with("rbac.authorization.k8s.io/aggregate-to")),
            "{o}"
        );
        for rule in rules_of(o) {
            let verbs = rule["verbs"].as_array().cloned().unwrap_or_default();
            assert!(
                !verbs.contains(&json!("use")) && !verbs.contains(&json!("*")),
                "{rule}"
            );
        }
    }
    let namespaces: Vec<Value> = rules_of(named(&objs, "ClusterRole", "kubevirt-operator"))
        .into_iter()
        .filter(|r| r["resources"].to_string().contains("\"namespaces\""))
        .collect();
    assert_eq!(
        namespaces,
        [json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]})]
    );
}
