use serde_json::json;

use super::*;

fn spec() -> MachineSpec {
    serde_json::from_value(json!({
        "disks": [
            {"name": "root", "source": {"dataSource": {"name": "golden"}}},
            {"name": "data", "size": "1Gi"},
            {"name": "copy", "source": {"dataSource": {"name": "golden", "namespace": "team"}}}],
        "cdroms": [{"name": "iso", "source": {"dataSource": {"name": "win", "namespace": "media"}}}]
    }))
    .expect("spec")
}

fn pvc(namespace: &str, name: &str) -> Target {
    Target::Pvc {
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn seen(target: Target, ready: bool) -> Seen {
    Seen { target, ready }
}

#[test]
fn only_the_data_sources_of_volumes_not_made_yet_are_read_each_once() {
    let all = to_read("team", "m", &spec(), |_| false);
    assert_eq!(
        all,
        [
            ("media".to_owned(), "win".to_owned()),
            ("team".to_owned(), "golden".to_owned())
        ]
    );
    // root made: copy still needs golden; iso made: win not read.
    let made = |dv: &str| dv == "m-root" || dv == "m-iso";
    assert_eq!(
        to_read("team", "m", &spec(), made),
        [("team".to_owned(), "golden".to_owned())]
    );
    let none = |_: &str| true;
    assert!(to_read("team", "m", &spec(), none).is_empty());
}

#[test]
fn each_volume_clones_what_its_data_source_points_to_there_or_says_why_not() {
    let golden = ("team".to_owned(), "golden".to_owned());
    let win = ("media".to_owned(), "win".to_owned());
    let problem = |field: &str, ds: &str, fault| Problem::DataSourceUnusable {
        field: field.into(),
        data_source: ds.into(),
        cluster: "dc1".into(),
        fault,
    };
    let root = "spec.disks[0].source.dataSource";
    let copy = "spec.disks[2].source.dataSource";
    let iso = "spec.cdroms[0].source.dataSource";
    let pinned = |ns: &str, name: &str| PinnedSource::Pvc {
        namespace: ns.into(),
        name: name.into(),
    };
    let cross = |ns: &str| DataSourceFault::CrossNamespace {
        namespace: ns.into(),
    };
    type Case = (
        &'static str,
        Vec<(Ref, Seen)>,
        bool,
        Vec<(&'static str, PinnedSource)>,
        Vec<Problem>,
    );
    let cases: Vec<Case> = vec![
        (
            "ready, in the namespace: pinned for both disks; win not read (its DataVolume made)",
            vec![(golden.clone(), seen(pvc("team", "debian"), true))],
            false,
            vec![
                ("copy", pinned("team", "debian")),
                ("root", pinned("team", "debian")),
            ],
            vec![],
        ),
        (
            "a snapshot is pinned as one",
            vec![(
                golden.clone(),
                seen(
                    Target::Snapshot {
                        namespace: "team".into(),
                        name: "s".into(),
                    },
                    true,
                ),
            )],
            false,
            vec![
                (
                    "copy",
                    PinnedSource::Snapshot {
                        namespace: "team".into(),
                        name: "s".into(),
                    },
                ),
                (
                    "root",
                    PinnedSource::Snapshot {
                        namespace: "team".into(),
                        name: "s".into(),
                    },
                ),
            ],
            vec![],
        ),
        (
            "missing there (whatever the management cluster holds)",
            vec![(golden.clone(), seen(Target::Missing, false))],
            false,
            vec![],
            vec![
                problem(root, "team/golden", DataSourceFault::Missing),
                problem(copy, "team/golden", DataSourceFault::Missing),
            ],
        ),
        (
            "not Ready, or naming no source",
            vec![
                (golden.clone(), seen(pvc("team", "debian"), false)),
                (win.clone(), seen(Target::Empty, true)),
            ],
            true,
            vec![],
            vec![
                problem(root, "team/golden", DataSourceFault::NotReady),
                problem(copy, "team/golden", DataSourceFault::NotReady),
                problem(iso, "media/win", DataSourceFault::NoSource),
            ],
        ),
        (
            "pointing at another namespace, or in one, without allowCrossNamespaceClones",
            vec![
                (golden.clone(), seen(pvc("os-images", "base"), true)),
                (win.clone(), seen(pvc("media", "win11"), true)),
            ],
            false,
            vec![],
            vec![
                problem(root, "team/golden", cross("os-images")),
                problem(copy, "team/golden", cross("os-images")),
                problem(iso, "media/win", cross("media")),
            ],
        ),
        (
            "the same with allowCrossNamespaceClones",
            vec![
                (golden.clone(), seen(pvc("os-images", "base"), true)),
                (win.clone(), seen(pvc("media", "win11"), true)),
            ],
            true,
            vec![
                ("copy", pinned("os-images", "base")),
                ("iso", pinned("media", "win11")),
                ("root", pinned("os-images", "base")),
            ],
            vec![],
        ),
        (
            "cross-namespace and not Ready: the namespace is said first",
            vec![(golden.clone(), seen(pvc("os-images", "base"), false))],
            false,
            vec![],
            vec![
                problem(root, "team/golden", cross("os-images")),
                problem(copy, "team/golden", cross("os-images")),
            ],
        ),
    ];
    for (what, data_sources, allow, pins, problems) in cases {
        let found = Found {
            cluster: "dc1".into(),
            allow_cross_namespace_clones: allow,
            data_sources: data_sources.into_iter().collect(),
        };
        let want = Resolved {
            pins: pins.into_iter().map(|(v, p)| (v.to_owned(), p)).collect(),
            problems,
        };
        assert_eq!(resolve("team", &spec(), &found), want, "{what}");
    }
}

#[test]
fn the_problem_names_the_field_the_data_source_and_the_cluster() {
    let p = Problem::DataSourceUnusable {
        field: "spec.disks[0].source.dataSource".into(),
        data_source: "team-a/golden".into(),
        cluster: "dc1".into(),
        fault: DataSourceFault::CrossNamespace {
            namespace: "os-images".into(),
        },
    };
    assert_eq!(p.reason(), "CrossNamespaceCloneForbidden");
    assert_eq!(
        p.to_string(),
        "spec.disks[0].source.dataSource: DataSource team-a/golden on cluster dc1 clones from \
         namespace \"os-images\", and KubevirtConfig dc1 does not set \
         allowCrossNamespaceClones: true"
    );
    let missing = Problem::DataSourceUnusable {
        field: "spec.disks[0].source.dataSource".into(),
        data_source: "team-a/golden".into(),
        cluster: "dc1".into(),
        fault: DataSourceFault::Missing,
    };
    assert_eq!(
        (missing.reason(), missing.to_string().as_str()),
        (
            "DataSourceNotFound",
            "spec.disks[0].source.dataSource: DataSource team-a/golden on cluster dc1 not \
             found: nothing is cloned until it exists there"
        )
    );
}

#[test]
fn ready_is_cdis_ready_condition_true() {
    let with = |conditions: serde_json::Value| json!({"status": {"conditions": conditions}});
    assert!(ready(&with(json!([{"type": "Ready", "status": "True"}]))));
    assert!(!ready(&with(json!([{"type": "Ready", "status": "False"}]))));
    assert!(!ready(&with(json!([{"type": "Other", "status": "True"}]))));
    assert!(!ready(&json!({"spec": {}})));
}
