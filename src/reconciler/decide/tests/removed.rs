//! A removed CD-ROM's DataVolume and, on a remote cluster, the credential copies it read
//! (judged by observe): deleted with the VM that no longer mounts them, each only if proven
//! for this Machine.

use super::*;
use crate::reconciler::apis::cdi::DataVolume;

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
