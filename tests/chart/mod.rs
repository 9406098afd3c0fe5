//! The packaging tools (helm v4, a kubectl with kustomize components, kubernetes-validate) from
//! `scripts/test-tools.sh`, and the chart and kustomize renderings the packaging tests compare.
//! `make test` passes the tools' directory in `KUBEVIRT_OPERATOR_TOOLS`; without it the script
//! runs here (it is cached, so only the first run fetches anything).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

pub const RELEASE: &str = "kubevirt-operator";
pub const NAMESPACE: &str = "kubevirt-operator-system";

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

pub fn chart_dir() -> PathBuf {
    repo("charts/kubevirt-operator")
}

pub fn tools() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("KUBEVIRT_OPERATOR_TOOLS") {
            return PathBuf::from(dir);
        }
        let out = Command::new(repo("scripts/test-tools.sh"))
            .output()
            .expect("run scripts/test-tools.sh");
        assert!(
            out.status.success(),
            "scripts/test-tools.sh: {}",
            text(&out)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

pub fn tool(name: &str) -> Command {
    Command::new(tools().join(name))
}

pub fn text(out: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd`, panics with its output unless it succeeds, returns stdout.
pub fn run(mut cmd: impl std::borrow::BorrowMut<Command>) -> String {
    let cmd = cmd.borrow_mut();
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    String::from_utf8(out.stdout).expect("utf-8")
}

pub fn docs(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

/// Writes `values` (YAML) to a file under target/ and returns its path.
pub fn values_file(name: &str, values: &str) -> PathBuf {
    let dir = repo("target/chart-test-values");
    std::fs::create_dir_all(&dir).expect("values dir");
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, values).expect("values file");
    path
}

/// Every value switched on (and the optional ones set), for lint, template and validation.
pub const ALL_TOGGLES: &str = r#"
certificates: {mode: cert-manager}
serviceMonitor: {enabled: true, labels: {release: prometheus}}
grafanaDashboard: {enabled: true, annotations: {grafana_folder: KubeVirt}}
image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
priorityClassName: system-cluster-critical
topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]
extraEnv: [{name: KUBE_API_QPS, value: "100"}]
serviceAccount: {annotations: {example.com/role: operator}}
prometheusRule: {enabled: true}
networkPolicy: {enabled: true, apiServerCIDRs: [192.0.2.0/24, "2001:db8::/64"]}
watchNamespaces: [team-a]
extraLabels: {team: platform}
extraAnnotations: {owner: platform@example.com}
podAnnotations: {example.com/scrape: "false"}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]}}}
imagePullSecrets: [{name: regcred}]
webhook: {serviceName: custom-webhook}
drainPeriodSeconds: 15
log: {format: text, level: debug}
leaderElection: {leaseDuration: 20s}
reconcileInterval: 1m
# A second release in the same cluster (chart_install.rs): none of the first one's classes (Helm
# refuses objects another release owns), a class of its own.
machineClasses:
  small: null
  medium: null
  large: null
  xlarge: {cpu: {cores: 8}, memory: {size: 32Gi}, limits: {cpu: {maxCores: 16}}}
"#;

/// The toggles that have a kustomize counterpart (components), set to the components' values.
pub const COMPONENTS: &str = r#"
grafanaDashboard: {enabled: true}
serviceMonitor: {enabled: true}
prometheusRule: {enabled: true}
networkPolicy: {enabled: true, apiServerCIDRs: [192.0.2.0/24]}
subresources: {enabled: true}
"#;

/// `helm template` of the chart as release kubevirt-operator, CRDs included.
pub fn helm_template(values: &[&Path], extra: &[&str]) -> String {
    let mut cmd = tool("helm");
    cmd.args(["template", RELEASE]).arg(chart_dir()).args([
        "--namespace",
        NAMESPACE,
        "--include-crds",
    ]);
    for v in values {
        cmd.arg("-f").arg(v);
    }
    cmd.args(extra);
    run(cmd)
}

/// The notes `helm install` prints for the chart with `extra` arguments (a client-side dry run:
/// `helm template` leaves NOTES.txt out).
pub fn helm_notes(extra: &[&str]) -> String {
    let home = repo("target/helm-home");
    let mut cmd = tool("helm");
    cmd.args(["install", RELEASE])
        .arg(chart_dir())
        .args(["--namespace", NAMESPACE, "--dry-run=client"])
        .args(extra)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    let out = run(cmd);
    let notes = out
        .find("NOTES:")
        .unwrap_or_else(|| panic!("no NOTES in {out}"));
    out[notes..].to_owned()
}

/// `kubectl kustomize` of `dir` (relative to the repository).
pub fn kustomize(dir: &Path) -> String {
    let mut cmd = tool("kubectl");
    cmd.arg("kustomize").arg(dir);
    run(cmd)
}

/// An overlay under target/ with `body` (paths in it relative to the repository root).
pub fn overlay(name: &str, body: &str) -> PathBuf {
    let dir = repo("target/kustomize-overlays").join(name);
    std::fs::create_dir_all(&dir).expect("overlay dir");
    std::fs::write(dir.join("kustomization.yaml"), body).expect("overlay");
    dir
}

/// The base with every component, as an admin's overlay would include them (match-conditions:
/// for Kubernetes 1.28+, the version `helm template` renders for by default).
pub fn kustomize_with_components() -> String {
    kustomize(&overlay(
        "components",
        "resources: [../../../manifests]\ncomponents: [../../../manifests/prometheus, ../../../manifests/network-policy, ../../../manifests/grafana, ../../../manifests/match-conditions, ../../../manifests/subresources]\n",
    ))
}

/// The base with the match-conditions component only (a Kubernetes 1.28+ install).
pub fn kustomize_for_1_28() -> String {
    kustomize(&overlay(
        "match-conditions",
        "resources: [../../../manifests]\ncomponents: [../../../manifests/match-conditions]\n",
    ))
}

/// The one object of `kind` among `objs`.
pub fn one<'a>(objs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

/// The one object of `kind` named `name` among `objs`.
pub fn named<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = objs
        .iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name}");
    found[0]
}

/// The value of the environment variable `name` of `deployment`'s first container.
pub fn env(deployment: &Value, name: &str) -> Option<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_owned))
}
