//! A remote Machine's `dataSource` volumes through `decide`: cloned from what its cluster's
//! DataSource points to, never from the annotation; a DataSource unusable there makes no
//! DataVolume and no VM; a made DataVolume keeps its source.

use super::*;
use crate::access::data_sources::Target;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::decide::problem::DataSourceFault;
use crate::reconciler::decide::remote_clones::{Found, Seen};

fn remote(target: Target, ready: bool) -> Observed {
    let mut m = machine(
        "m",
        json!({"template": "small",
               "disks": [{"name": "root", "size": "20Gi", "source": {"dataSource": {"name": "golden"}}}]}),
    );
    // A pin written by hand (or by an earlier version, from the management cluster).
    m.metadata.annotations = Some(BTreeMap::from([(
        crate::api::names::CLONE_SOURCES_ANNOTATION.to_owned(),
        r#"{"root":{"pvc":{"namespace":"ns","name":"payroll"}}}"#.to_owned(),
    )]));
    let mut o = observed(m);
    o.remote = true;
    o.remote_clones = Some(Found {
        cluster: "dc1".into(),
        allow_cross_namespace_clones: false,
        data_sources: BTreeMap::from([(
            ("ns".to_owned(), "golden".to_owned()),
            Seen { target, ready },
        )]),
    });
    o
}

fn source(d: &Decision) -> Value {
    serde_json::to_value(&d.data_volumes[0].spec.source).expect("json")
}

#[test]
fn a_remote_data_source_is_cloned_from_what_it_points_to_there() {
    let o = remote(
        Target::Pvc {
            namespace: "ns".into(),
            name: "far-image".into(),
        },
        true,
    );
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(
        source(&d),
        json!({"pvc": {"namespace": "ns", "name": "far-image"}})
    );
    assert!(d.vm.is_some());
}

#[test]
fn an_unusable_remote_data_source_makes_nothing_and_says_why() {
    let o = remote(Target::Missing, false);
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(
        d.problems,
        [Problem::DataSourceUnusable {
            field: "spec.disks[0].source.dataSource".into(),
            data_source: "ns/golden".into(),
            cluster: "dc1".into(),
            fault: DataSourceFault::Missing,
        }]
    );
    assert!(d.data_volumes.is_empty() && d.vm.is_none());
}

#[test]
fn a_made_remote_data_volume_keeps_its_source() {
    // Made from far-image; the DataSource is not read again (observe skips it), so nothing
    // was found for it: the made DataVolume's source stays, with no problem.
    let mut o = remote(Target::Missing, false);
    if let Some(found) = o.remote_clones.as_mut() {
        found.data_sources.clear();
    }
    let mut dv = DataVolume {
        metadata: meta("DataVolume", "m-root", Some(UID), Some("m")),
        spec: Default::default(),
        status: None,
    };
    dv.spec.source = Some(
        serde_json::from_value(json!({"pvc": {"namespace": "ns", "name": "far-image"}}))
            .expect("source"),
    );
    o.data_volumes.insert("m-root".into(), dv);
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(
        source(&d),
        json!({"pvc": {"namespace": "ns", "name": "far-image"}})
    );
}
