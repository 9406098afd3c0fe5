//! DataVolumes (disks with a source, CD-ROMs) through `decide`: the claims' ownership rules,
//! the claim CDI fills, retain-disks, and CDI not installed.

use super::*;
use crate::reconciler::apis::cdi::DataVolume;

const IMAGE: &str = "https://cloud.debian.org/debian-12-generic-amd64.qcow2";

fn imaged(name: &str) -> Machine {
    machine(
        name,
        json!({"template": "small",
               "disks": [{"name": "root", "size": "20Gi", "source": {"http": {"url": IMAGE}}}],
               "cdroms": [{"name": "iso", "source": {"http": {"url": "https://a/b.iso"}}}]}),
    )
}

fn data_volume(name: &str, controller: Option<&str>, labelled_for: Option<&str>) -> DataVolume {
    DataVolume {
        metadata: meta(name, controller, labelled_for),
        spec: Default::default(),
        status: None,
    }
}

fn names(d: &Decision) -> Vec<String> {
    d.data_volumes.iter().map(|d| d.name_any()).collect()
}

#[test]
fn data_volumes_follow_the_claims_rules() {
    for e in ALL {
        let mut o = observed(imaged("m"));
        if let Some((c, l)) = existing(e) {
            o.data_volumes
                .insert("m-root".into(), data_volume("m-root", c, l));
        }
        let d = decide(&o, &Catalog::default());
        let writable = matches!(e, Absent | Ours | ReleasedForThisMachine);
        assert_eq!(
            d.vm.is_some(),
            writable,
            "{e:?}: VM only with its DataVolume"
        );
        if writable {
            assert!(d.problems.is_empty(), "{e:?}: {:?}", d.problems);
            assert_eq!(names(&d), ["m-root", "m-iso"], "{e:?}");
            let refs = d.data_volumes[0].metadata.owner_references.as_ref();
            assert_eq!(refs.map(|r| r[0].uid.as_str()), Some(UID), "{e:?}");
        } else {
            assert_eq!(reasons(&d), ["DataVolumeConflict"], "{e:?}");
            assert_eq!(
                d.problems[0].to_string(),
                "DataVolume m-root exists and is not controlled by this Machine"
            );
            // Never written; the other volumes still are.
            assert_eq!(names(&d), ["m-iso"], "{e:?}");
        }
        // The blank template disks are none here: `root` has the source.
        assert!(d.claims.is_empty(), "{e:?}");
    }
}

#[test]
fn the_claim_cdi_fills_must_be_the_data_volumes() {
    let mut o = observed(imaged("m"));
    let dv = data_volume("m-root", Some(UID), Some("m"));
    o.data_volumes.insert("m-root".into(), dv);
    // CDI's claim, controlled by the DataVolume.
    o.claims
        .insert("m-root".into(), claim("m-root", Some("uid-m-root"), None));
    let d = decide(&o, &Catalog::default());
    assert!(d.problems.is_empty() && d.vm.is_some(), "{:?}", d.problems);

    // A claim of that name someone else made (here before the DataVolume exists).
    let mut o = observed(imaged("m"));
    o.claims
        .insert("m-root".into(), claim("m-root", Some("uid-a"), Some("a")));
    let d = decide(&o, &Catalog::default());
    assert_eq!(reasons(&d), ["ClaimConflict"]);
    assert!(d.vm.is_none());
}

#[test]
fn retain_disks_releases_the_disks_data_volumes_not_the_cdroms() {
    let mut m = imaged("m");
    m.metadata.annotations = Some(BTreeMap::from([(
        RETAIN_DISKS_ANNOTATION.to_owned(),
        "true".to_owned(),
    )]));
    let d = decide(&observed(m), &Catalog::default());
    assert_eq!(names(&d), ["m-root", "m-iso"]);
    assert_eq!(d.data_volumes[0].metadata.owner_references, None);
    assert!(d.data_volumes[1].metadata.owner_references.is_some());
}

/// Which removed volumes are candidates is `volumes::removed_cdroms` (CD-ROMs only); decide
/// deletes the candidates this Machine controls, with the VM that no longer mounts them.
#[test]
fn a_removed_cdroms_data_volume_is_deleted_if_ours_with_the_vm() {
    let mut o = observed(imaged("m"));
    o.unwanted_data_volumes = vec![
        data_volume("m-old-iso", Some(UID), Some("m")),
        // Released by a retain-disks deletion, or someone else's: left alone.
        data_volume("m-other-iso", None, Some("m")),
        data_volume("m-kept", Some("uid-a"), Some("m")),
    ];
    let d = decide(&o, &Catalog::default());
    assert_eq!(
        d.delete_data_volumes,
        [("m-old-iso".to_owned(), "uid-m-old-iso".to_owned())]
    );
    assert!(
        d.vm.is_some(),
        "deleted with the VM that no longer mounts it"
    );

    // A VM held back (here by a foreign DataVolume in the way) still mounts the CD-ROM: nothing
    // is deleted.
    o.data_volumes
        .insert("m-root".into(), data_volume("m-root", Some("uid-a"), None));
    let held = decide(&o, &Catalog::default());
    assert!(held.vm.is_none() && held.delete_data_volumes.is_empty());
}

#[test]
fn without_cdi_only_machines_with_sources_wait() {
    let mut o = observed(imaged("m"));
    o.cdi_installed = false;
    let d = decide(&o, &Catalog::default());
    assert_eq!(reasons(&d), ["CDINotInstalled"]);
    assert!(d.problems[0].to_string().contains("disk root, cdrom iso"));
    assert!(d.vm.is_none() && d.data_volumes.is_empty());

    let mut plain = observed(machine("p", json!({"template": "small"})));
    plain.cdi_installed = false;
    let d = decide(&plain, &Catalog::default());
    assert!(d.problems.is_empty() && d.vm.is_some());
}
