//! Issue 24, the chart's values as an admin meets them: values.schema.json types every value, so
//! a bad one is refused by `helm lint` and `helm template` alike, naming its path (before, each
//! of the examples rendered with exit 0, or with a template stack trace); the chart's
//! README, shipped in the chart, is generated from values.yaml's comments and documents every
//! value; Artifact Hub's annotations agree with the chart.

mod chart;

use chart::{chart_dir, docs, repo, text, tool, tools};
use serde_json::Value;

fn helm(args: &[&str], set: &[&str]) -> std::process::Output {
    let mut cmd = tool("helm");
    cmd.args(args).arg(chart_dir());
    for s in set {
        cmd.args(["--set", s]);
    }
    cmd.output().expect("helm")
}

/// Each bad value, with the path helm must name.
const BAD: &[(&[&str], &str)] = &[
    // The examples.
    (
        &["replicaCount=two"],
        "at '/replicaCount': got string, want integer",
    ),
    (&["image.pullPolicy=Sometimes"], "at '/image/pullPolicy'"),
    (
        &["leaderElection.enabled=nope"],
        "at '/leaderElection/enabled': got string, want boolean",
    ),
    (&["reconcileInterval=soon"], "at '/reconcileInterval'"),
    (&["nodeUnreachableGrace=soon"], "at '/nodeUnreachableGrace'"),
    (&["orphanCheckInterval=soon"], "at '/orphanCheckInterval'"),
    (
        &["serviceMonitor.interval=30 seconds"],
        "at '/serviceMonitor/interval'",
    ),
    (
        &["watchNamespaces=team-a"],
        "at '/watchNamespaces': got string, want array",
    ),
    // What the templates' own checks refused before (now the schema's).
    (&["certificates.mode=vault"], "at '/certificates/mode'"),
    (
        &["networkPolicy.apiServerCIDRs={10.0.0.1}"],
        "at '/networkPolicy/apiServerCIDRs/0'",
    ),
    (&["log.format=xml"], "at '/log/format'"),
    (
        &["defaultEvictionStrategy=Evict"],
        "at '/defaultEvictionStrategy'",
    ),
    (&["watchNamespaces={Team_A}"], "at '/watchNamespaces/0'"),
    (
        &["cloneSourceNamespaces={OS_Images}"],
        "at '/cloneSourceNamespaces/0'",
    ),
    (&["drainPeriodSeconds=0"], "at '/drainPeriodSeconds'"),
    // More of the same kind.
    (&["image.digest=latest"], "at '/image/digest'"),
    (
        &["leaderElection.leaseDuration=15"],
        "at '/leaderElection/leaseDuration'",
    ),
    (
        &["certificates.selfManaged.renewBefore=100%"],
        "at '/certificates/selfManaged/renewBefore'",
    ),
    (
        &["resources.requests.memory=lots"],
        "at '/resources/requests/memory'",
    ),
    (&["allowedBridges={a/b}"], "at '/allowedBridges/0'"),
    (&["allowedVlans=ten"], "at '/allowedVlans'"),
    (
        &["priorityClassName=High_Priority"],
        "at '/priorityClassName'",
    ),
    (&["extraEnv[0].value=x"], "at '/extraEnv/0'"),
    (
        &["replicas=3"],
        "additional properties 'replicas' not allowed",
    ),
    (
        &["webhook.port=8443"],
        "additional properties 'port' not allowed",
    ),
];

#[test]
fn bad_values_are_refused_by_lint_and_template_with_their_path() {
    for (set, path) in BAD {
        for cmd in [&["template", "x"][..], &["lint", "--strict"][..]] {
            let out = helm(cmd, set);
            let all = text(&out);
            assert!(!out.status.success(), "{set:?} accepted by helm {cmd:?}");
            assert!(
                all.contains(path),
                "{set:?}, helm {cmd:?}: no {path:?} in\n{all}"
            );
            assert!(!all.contains("goroutine"), "{set:?}: a stack trace\n{all}");
        }
    }
}

#[test]
fn good_values_pass_and_durations_mean_what_the_operator_reads() {
    for set in [
        &[
            "reconcileInterval=1m30s",
            "leaderElection.leaseDuration=20s",
        ][..],
        &[
            "certificates.selfManaged.renewBefore=4h",
            "certificates.selfManaged.caDuration=720h",
        ],
        &[
            "certificates.selfManaged.renewBefore=25%",
            "serviceMonitor.interval=1m",
        ],
        &["image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"],
        &[
            "terminationGracePeriodSeconds=60",
            "podDisruptionBudget.minAvailable=50%",
        ],
        &[
            "allowedVlans=0",
            "priorityClassName=system-cluster-critical",
        ],
        &["extraEnv[0].name=KUBE_API_QPS", "extraEnv[0].value=100"],
        &["global.imageRegistry=example.com"],
    ] {
        let out = helm(&["template", "x"], set);
        assert!(out.status.success(), "{set:?}: {}", text(&out));
    }
    // Every duration the schema admits for the operator's settings, it parses too.
    for d in ["30s", "1m30s", "1.5h", "168h", "500ms"] {
        let out = helm(&["template", "x"], &[&format!("reconcileInterval={d}")]);
        assert!(out.status.success(), "{d}: {}", text(&out));
        kubevirt_operator::config::parse_duration(d).expect("the operator reads it");
    }
}

/// Whether the schema has a node for `path` in values.yaml; a free-form object (no
/// `properties`) covers everything under it.
fn schema_covers(schema: &Value, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return true;
    };
    let props = &schema["properties"];
    if let Some(s) = props.get(first) {
        return schema_covers(s, rest);
    }
    // A map whose values follow one schema (machineClasses: name -> class).
    if let Some(each) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        return schema_covers(each, rest);
    }
    props.is_null()
        && schema["type"] == "object"
        && schema.get("additionalProperties") != Some(&Value::Bool(false))
}

fn leaves(v: &Value, at: Vec<String>, out: &mut Vec<Vec<String>>) {
    match v.as_object() {
        Some(map) if !map.is_empty() => {
            for (k, sub) in map {
                let mut p = at.clone();
                p.push(k.clone());
                leaves(sub, p, out);
            }
        }
        _ => out.push(at),
    }
}

#[test]
fn every_value_has_a_schema_and_a_documented_row() {
    let values: Value = serde_yaml::from_str(
        &std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml"),
    )
    .expect("YAML");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(chart_dir().join("values.schema.json")).expect("schema"),
    )
    .expect("JSON");
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).expect("README");
    let rows: Vec<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next().map(str::to_owned))
        .collect();
    let mut all = Vec::new();
    leaves(&values, Vec::new(), &mut all);
    assert!(all.len() > 50, "{all:?}");
    for path in all {
        let dotted = path.join(".");
        assert!(schema_covers(&schema, &path), "{dotted}: no schema");
        let documented = (1..=path.len()).any(|n| rows.contains(&path[..n].join(".")));
        assert!(
            documented,
            "{dotted}: not in the chart README (a `# --` comment in values.yaml)"
        );
    }
}

#[test]
fn the_chart_readme_is_generated_from_values_yaml_and_shipped() {
    let out = std::process::Command::new(tools().join("venv/bin/python"))
        .arg(repo("scripts/chart-readme.py"))
        .arg("--check")
        .output()
        .expect("chart-readme.py");
    assert!(out.status.success(), "{}", text(&out));
    let shown = chart::run({
        let mut cmd = tool("helm");
        cmd.args(["show", "readme"]).arg(chart_dir());
        cmd
    });
    assert!(
        shown.contains("## Values") && shown.contains("| `replicaCount` | int |"),
        "{shown}"
    );
}

#[test]
fn artifact_hub_metadata_agrees_with_the_chart() {
    let chart: Value = serde_yaml::from_str(
        &std::fs::read_to_string(chart_dir().join("Chart.yaml")).expect("Chart.yaml"),
    )
    .expect("YAML");
    let icon = chart["icon"].as_str().expect("an icon");
    let file = icon
        .rsplit("/main/")
        .next()
        .expect("a path in the repository");
    assert!(repo(file).exists(), "the icon {file} is in the repository");
    let annotation = |key: &str| -> Value {
        serde_yaml::from_str(chart["annotations"][key].as_str().expect(key)).expect(key)
    };
    let images = annotation("artifacthub.io/images");
    assert_eq!(
        images[0]["image"],
        format!(
            "ghcr.io/vitistack/kubevirt-operator-rs:{}",
            chart["appVersion"].as_str().expect("appVersion")
        )
    );
    let listed: Vec<String> = annotation("artifacthub.io/crds")
        .as_array()
        .expect("crds")
        .iter()
        .map(|c| format!("{} {} {}", c["name"], c["kind"], c["version"]))
        .collect();
    let mut shipped = Vec::new();
    for f in std::fs::read_dir(chart_dir().join("files/crds")).expect("files/crds") {
        let text = std::fs::read_to_string(f.expect("entry").path()).expect("read");
        for crd in docs(&text) {
            shipped.push(format!(
                "{} {} {}",
                crd["metadata"]["name"],
                crd["spec"]["names"]["kind"],
                crd["spec"]["versions"][0]["name"]
            ));
        }
    }
    shipped.sort();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort();
    assert_eq!(
        listed_sorted, shipped,
        "artifacthub.io/crds lists the shipped CRDs"
    );
    for example in annotation("artifacthub.io/crdsExamples")
        .as_array()
        .expect("examples")
    {
        assert!(listed.iter().any(|l| l.contains(&format!(
            "\"{}\"",
            example["kind"].as_str().unwrap_or_default()
        ))));
    }
    let out = tool("helm")
        .args(["lint", "--strict"])
        .arg(chart_dir())
        .output()
        .expect("helm lint");
    let said = text(&out);
    assert!(
        out.status.success() && !said.contains("[INFO]") && !said.contains("[WARNING]"),
        "{said}"
    );
}
