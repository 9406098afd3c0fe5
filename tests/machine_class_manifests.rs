//! The MachineClasses shipped in `manifests/machineclasses/` and the chart are the built-ins,
//! valid by the operator's own class rules; and `kubectl get mc` on a real kube-apiserver shows
//! cores, memory, root disk, default and enabled (the CRD's printer columns and defaults).

mod chart;
mod support;

use std::process::Output;

use serde_json::json;

use chart::{docs, helm_template, kustomize, repo};
use kubevirt_operator::api::MachineClass;
use kubevirt_operator::machine::classes::Class;
use kubevirt_operator::machine::templates::BUILT_IN;
use support::{ControlPlane, Fixture};

fn classes(yaml: &str) -> Vec<MachineClass> {
    docs(yaml)
        .into_iter()
        .filter(|d| d["kind"] == "MachineClass")
        .map(|d| serde_json::from_value(d).expect("a MachineClass"))
        .collect()
}

#[test]
fn the_shipped_classes_are_the_built_ins_and_pass_the_class_rules() {
    for (source, shipped) in [
        (
            "manifests/machineclasses",
            classes(&kustomize(&repo("manifests/machineclasses"))),
        ),
        ("the chart", classes(&helm_template(&[], &[]))),
    ] {
        let mut names: Vec<String> = shipped
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        names.sort();
        assert_eq!(names, ["large", "medium", "small"], "{source}");
        for object in &shipped {
            let name = object.metadata.name.as_deref().unwrap_or_default();
            let class = Class::from_spec(name, &object.spec)
                .unwrap_or_else(|e| panic!("{source}: {name}: {e:?}"));
            let t = BUILT_IN.iter().find(|t| t.name == name).expect("built-in");
            // The same record as the compiled-in class: applying them changes no Machine.
            assert_eq!(class.record, Class::built_in(t).record, "{source}: {name}");
            assert!(class.enabled && !class.default, "{source}: {name}");
        }
    }
    assert!(
        classes(&helm_template(&[], &["--set", "machineClasses=null"])).is_empty(),
        "machineClasses: null creates none"
    );
}

async fn kubectl(cp: &ControlPlane, args: &[&str], stdin: Option<String>) -> Output {
    let mut cmd = cp.kubectl().expect("kubectl");
    cmd.args(args);
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        use std::process::Stdio;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin.unwrap_or_default().as_bytes())?;
        drop(input);
        child.wait_with_output()
    })
    .await
    .expect("join")
    .expect("run kubectl")
}

fn text(out: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn kubectl_get_mc_shows_cores_memory_root_disk_default_and_enabled() {
    let cp = Fixture::new().with_machine_crds().shared().await;
    // The shipped classes are accepted by the served CRD's schema.
    let shipped = kustomize(&repo("manifests/machineclasses"));
    let out = kubectl(cp, &["apply", "-f", "-", "--dry-run=server"], Some(shipped)).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches("(server dry run)")
            .count(),
        3,
        "{}",
        text(&out)
    );
    // A class of this test's own (classes are cluster-wide; the control plane is shared).
    let name = format!("columns-{}", std::process::id());
    let class = json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineClass",
        "metadata": {"name": name},
        "spec": {"cpu": {"cores": 4}, "memory": {"size": "48Gi"},
                 "disks": [{"name": "data", "size": "1Ti"}, {"name": "root", "size": "100Gi"}]}
    });
    let out = kubectl(cp, &["create", "-f", "-"], Some(class.to_string())).await;
    assert!(out.status.success(), "{}", text(&out));
    let out = kubectl(cp, &["get", "mc", &name], None).await;
    let _ = kubectl(cp, &["delete", "mc", &name], None).await;
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "CORES",
            "MEMORY",
            "ROOT DISK",
            "DEFAULT",
            "ENABLED",
            "AGE"
        ],
        "{table}"
    );
    // The root disk by name, wherever it is; default and enabled filled in by the API server.
    assert_eq!(
        rows[1][..6],
        [name.as_str(), "4", "48Gi", "100Gi", "false", "true"],
        "{table}"
    );
}
