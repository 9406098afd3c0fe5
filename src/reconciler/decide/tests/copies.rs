//! A remote Machine's credential copies through `decide`: those its DataVolumes read, written
//! before them; a removed CD-ROM's, deleted with its DataVolume (judged by observe), each only if
//! proven for this Machine.

use super::*;
use k8s_openapi::api::core::v1::ConfigMap;

use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::decide::remote_secrets::{Credential, Found, Wanted, wanted_copies};

/// A Machine whose disk imports with credentials and a CA, and whose CD-ROM with a CA only.
fn importing() -> Machine {
    machine(
        "m",
        json!({"template": "small",
               "disks": [{"name": "root", "size": "20Gi", "source": {"http": {
                   "url": "https://x/a.qcow2", "secretRef": {"name": "creds"},
                   "certConfigMap": "ca"}}}],
               "cdroms": [{"name": "iso", "source": {"http": {
                   "url": "https://x/b.iso", "certConfigMap": "ca"}}}]}),
    )
}

/// Each copy `m` asks for as observe finds it: every source there, nothing under the copies'
/// names on the remote cluster.
fn found(o: &Observed) -> Vec<(Wanted, Found)> {
    let wanted = wanted_copies("m", &o.spec.disks, &o.spec.cdroms);
    let found = |w: &Wanted| match w.what {
        Credential::Secret => Found::Secret {
            source: Some(Secret::default()),
            live: None,
        },
        Credential::ConfigMap => Found::ConfigMap {
            source: Some(ConfigMap::default()),
            live: None,
        },
    };
    wanted.into_iter().map(|w| (w.clone(), found(&w))).collect()
}

fn written(d: &Decision) -> Vec<String> {
    (d.copies.writes.iter())
        .map(|(w, _)| w.copy.clone())
        .collect()
}

#[test]
fn the_copies_written_are_those_the_data_volumes_written_read() {
    let mut o = observed(importing());
    o.remote = true;
    o.credentials = found(&o);
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(written(&d), ["m-root-credentials", "m-root-ca", "m-iso-ca"]);
    let http = |i: usize| {
        d.data_volumes[i]
            .spec
            .source
            .as_ref()
            .and_then(|s| s.http.clone())
    };
    assert_eq!(
        http(0).map(|h| (h.secret_ref, h.cert_config_map)),
        Some((Some("m-root-credentials".into()), Some("m-root-ca".into())))
    );

    // A source gone: that copy is not written (CDI waits), its DataVolume is.
    let mut gone = o.clone();
    gone.credentials[1].1 = Found::ConfigMap {
        source: None,
        live: None,
    };
    let d = decide(&gone, &Catalog::default(), &key());
    assert_eq!(written(&d), ["m-root-credentials", "m-iso-ca"]);
    assert_eq!(d.data_volumes.len(), 2);

    // Someone else's Secret under a copy's name: not written over, and the DataVolume that
    // would read it is not written; the other copies are.
    let mut taken = o.clone();
    let foreign = Secret {
        metadata: meta("Secret", "m-root-credentials", None, None),
        ..Secret::default()
    };
    taken.credentials[0].1 = Found::Secret {
        source: Some(Secret::default()),
        live: Some(foreign),
    };
    let d = decide(&taken, &Catalog::default(), &key());
    assert_eq!(written(&d), ["m-root-ca", "m-iso-ca"]);
    assert_eq!(reasons_of(&d.copies.conflicts), ["SecretConflict"]);
    let names: Vec<String> = d.data_volumes.iter().map(|dv| dv.name_any()).collect();
    assert_eq!(names, ["m-iso"]);

    // Someone else's DataVolume under the disk's name: it is not written, nor are its copies.
    let dv = DataVolume {
        metadata: meta("DataVolume", "m-root", None, None),
        spec: Default::default(),
        status: None,
    };
    o.data_volumes.insert("m-root".into(), dv);
    assert_eq!(
        written(&decide(&o, &Catalog::default(), &key())),
        ["m-iso-ca"]
    );

    // On the operator's own cluster nothing is copied: CDI reads the sources themselves.
    o.remote = false;
    let d = decide(&o, &Catalog::default(), &key());
    assert!(written(&d).is_empty());
}

fn reasons_of(problems: &[Problem]) -> Vec<&'static str> {
    problems.iter().map(Problem::reason).collect()
}

fn removed_iso(controller: Option<&str>) -> DataVolume {
    DataVolume {
        metadata: meta("DataVolume", "m-iso", controller, Some("m")),
        spec: Default::default(),
        status: None,
    }
}

#[test]
fn a_removed_cdroms_copies_go_with_its_data_volume_only_when_proven_ours() {
    let mut o = observed(machine("m", json!({"template": "small"})));
    o.remote = true;
    o.unwanted_data_volumes = vec![removed_iso(Some(UID))];
    let copy = |controller, labelled_for| {
        let (secret, ca) = ("m-iso-credentials", "m-iso-ca");
        let copies = vec![
            (
                Kind::Secret,
                meta("Secret", secret, controller, labelled_for),
            ),
            (
                Kind::ConfigMap,
                meta("ConfigMap", ca, controller, labelled_for),
            ),
        ];
        BTreeMap::from([("m-iso".to_owned(), copies)])
    };
    let dv = (Kind::DataVolume, "m-iso".to_owned(), "uid-m-iso".to_owned());
    let ours = [
        dv.clone(),
        (
            Kind::Secret,
            "m-iso-credentials".into(),
            "uid-m-iso-credentials".into(),
        ),
        (Kind::ConfigMap, "m-iso-ca".into(), "uid-m-iso-ca".into()),
    ];
    let cases = [
        ("ours", copy(Some(UID), Some("m")), &ours[..]),
        ("someone else's", copy(None, None), &ours[..1]),
        (
            "an earlier Machine's",
            copy(Some("uid-other"), Some("m")),
            &ours[..1],
        ),
        ("none", BTreeMap::new(), &ours[..1]),
    ];
    for (what, copies, want) in cases {
        o.removed_copies = copies;
        let d = decide(&o, &Catalog::default(), &key());
        assert!(d.vm.is_some(), "{what}: with the VM");
        assert_eq!(d.delete_removed, want, "{what}");
    }

    // Its DataVolume released (retain-disks) or someone else's: nothing of it is deleted.
    o.removed_copies = copy(Some(UID), Some("m"));
    o.unwanted_data_volumes = vec![removed_iso(None)];
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(d.delete_removed, []);
}
