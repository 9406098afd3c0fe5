//! What a scan listed: leftovers and unproven objects kept, which claims count, the tally.

use super::*;

#[test]
fn judged_keeps_leftovers_and_unproven_of_what_was_listed() {
    let listed = |o: Obj| Listed {
        kind: PVC.to_owned(),
        meta: meta(o),
    };
    let machines = live(&[("m", "uid-m")]);
    let ours = listed(Obj {
        labels: Some("m"),
        made: Some(("m", "uid-m")),
        ..Obj::default()
    });
    let gone = listed(Obj {
        labels: Some("m"),
        made: Some(("m", "uid-old")),
        ..Obj::default()
    });
    let forged = listed(Obj {
        labels: Some("m"),
        made: Some(("m", "uid-m")),
        forged: true,
        ..Obj::default()
    });
    let found = judged("dc1", &key(), &[ours, gone, forged], &machines);
    let got: Vec<(&str, &str, &Verdict)> = (found.iter())
        .map(|f| (f.cluster.as_str(), f.namespace.as_str(), &f.verdict))
        .collect();
    assert_eq!(
        got,
        [
            ("dc1", NS, &orphan(Why::MachineReplaced)),
            ("dc1", NS, &Verdict::Unproven)
        ]
    );
    assert!(found.iter().all(|f| f.name == "m-root" && f.kind == PVC));
}

#[test]
fn claims_only_with_a_label_or_proof_of_ours_and_not_being_deleted() {
    assert!(!claims(&meta(Obj::default())), "foreign");
    assert!(claims(&meta(Obj {
        labels: Some("m"),
        ..Obj::default()
    })));
    assert!(claims(&meta(Obj {
        made: Some(("m", "uid-m")),
        ..Obj::default()
    })));
    assert!(!claims(&meta(Obj {
        labels: Some("m"),
        deleting: true,
        ..Obj::default()
    })));
}

#[test]
fn tally_counts_per_cluster_and_kind_and_never_zero_for_a_cluster_not_looked_at() {
    let f = |cluster: &str, kind: &str, verdict: Verdict| Found {
        cluster: cluster.to_owned(),
        kind: kind.to_owned(),
        namespace: NS.to_owned(),
        name: "x".to_owned(),
        verdict,
    };
    let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let counts = |vm: (i64, i64), pvc: (i64, i64), dv: (i64, i64)| {
        let c = |(leftovers, unproven)| Count {
            leftovers,
            unproven,
        };
        Some(BTreeMap::from([
            ("VirtualMachine", c(vm)),
            ("PersistentVolumeClaim", c(pvc)),
            ("DataVolume", c(dv)),
        ]))
    };
    let gone = orphan(Why::MachineGone);
    // What, found, checked, unchecked, the tally.
    type Case = (&'static str, Vec<Found>, Vec<String>, Vec<String>, Tally);
    let cases: Vec<Case> = vec![
        (
            "nothing anywhere: zeros for every kind",
            vec![],
            names(&["local"]),
            vec![],
            BTreeMap::from([("local".to_owned(), counts((0, 0), (0, 0), (0, 0)))]),
        ),
        (
            "leftovers and unproven counted apart, per kind and cluster",
            vec![
                f("local", "VirtualMachine", gone.clone()),
                f("local", PVC, gone.clone()),
                f("local", PVC, orphan(Why::Released)),
                f("local", PVC, Verdict::Unproven),
                f("dc1", "DataVolume", orphan(Why::MachineReplaced)),
            ],
            names(&["local", "dc1"]),
            vec![],
            BTreeMap::from([
                ("local".to_owned(), counts((1, 0), (2, 1), (0, 0))),
                ("dc1".to_owned(), counts((0, 0), (0, 0), (1, 0))),
            ]),
        ),
        (
            "an unreachable cluster has no count, not zero",
            vec![],
            names(&["local"]),
            names(&["dc2"]),
            BTreeMap::from([
                ("local".to_owned(), counts((0, 0), (0, 0), (0, 0))),
                ("dc2".to_owned(), None),
            ]),
        ),
        (
            "not looked at wins over checked, and what it found is dropped",
            vec![f("dc1", PVC, gone.clone())],
            names(&["local", "dc1"]),
            names(&["dc1"]),
            BTreeMap::from([
                ("local".to_owned(), counts((0, 0), (0, 0), (0, 0))),
                ("dc1".to_owned(), None),
            ]),
        ),
        (
            "found on a cluster not named, or of another kind: not counted",
            vec![f("dc9", PVC, gone.clone()), f("local", "Pod", gone)],
            names(&["local"]),
            vec![],
            BTreeMap::from([("local".to_owned(), counts((0, 0), (0, 0), (0, 0)))]),
        ),
    ];
    for (what, found, checked, unchecked, want) in cases {
        assert_eq!(tally(&found, &checked, &unchecked), want, "{what}");
    }
}
