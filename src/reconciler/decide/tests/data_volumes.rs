//! DataVolumes (disks with a source, CD-ROMs) through `decide`: the claims' ownership rules,
//! the claim CDI fills, retain-disks, and CDI not installed.

use super::*;
use crate::reconciler::apis::cdi::{
    CREATED_FOR_DATA_VOLUME, DataVolume, StorageResources, StorageSpec,
};

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
        metadata: meta("DataVolume", name, controller, labelled_for),
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
        let d = decide(&o, &Catalog::default(), &key());
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
    // CDI's claim: controlled by the DataVolume and annotated with its uid.
    let cdi_claim = |controller: Option<&str>, created_for: Option<&str>| {
        let mut c = claim("m-root", controller, None);
        c.metadata.annotations = created_for
            .map(|uid| BTreeMap::from([(CREATED_FOR_DATA_VOLUME.to_owned(), uid.to_owned())]));
        c
    };
    // (claim, DataVolume exists, expected problems): a claim CDI did not make for that very
    // DataVolume is a conflict, and no DataVolume is written over it.
    let cases: &[(Option<PersistentVolumeClaim>, bool, &[&str])] = &[
        (None, false, &[]),
        (None, true, &[]),
        (
            Some(cdi_claim(Some("uid-m-root"), Some("uid-m-root"))),
            true,
            &[],
        ),
        // Controlled by the DataVolume without CDI's mark (the owner reference alone is forgeable).
        (
            Some(cdi_claim(Some("uid-m-root"), None)),
            true,
            &["ClaimConflict"],
        ),
        // Marked for it, not controlled by it.
        (
            Some(cdi_claim(None, Some("uid-m-root"))),
            true,
            &["ClaimConflict"],
        ),
        // Made for another DataVolume.
        (
            Some(cdi_claim(Some("uid-x"), Some("uid-x"))),
            true,
            &["ClaimConflict"],
        ),
        // Someone else's, before the DataVolume exists: CDI must never adopt it.
        (
            Some(claim("m-root", Some("uid-a"), Some("a"))),
            false,
            &["ClaimConflict"],
        ),
        (Some(claim("m-root", None, None)), false, &["ClaimConflict"]),
    ];
    for (i, (c, dv_exists, want)) in cases.iter().enumerate() {
        let mut o = observed(imaged("m"));
        if *dv_exists {
            let dv = data_volume("m-root", Some(UID), Some("m"));
            o.data_volumes.insert("m-root".into(), dv);
        }
        if let Some(c) = c {
            o.claims.insert("m-root".into(), c.clone());
        }
        let d = decide(&o, &Catalog::default(), &key());
        assert_eq!(reasons(&d), *want, "case {i}");
        assert_eq!(d.vm.is_some(), want.is_empty(), "case {i}");
        let written = names(&d).contains(&"m-root".to_owned());
        assert_eq!(written, want.is_empty(), "case {i}: DataVolume written");
    }
}

#[test]
fn a_grown_sourced_disk_grows_cdis_claim_and_never_the_data_volume() {
    let mut m = imaged("m");
    m.spec.disks[0].size = Some("30Gi".into());
    let mut o = observed(m);
    let mut dv = data_volume("m-root", Some(UID), Some("m"));
    dv.spec.storage = Some(StorageSpec {
        resources: Some(StorageResources {
            requests: BTreeMap::from([("storage".to_owned(), "20Gi".to_owned())]),
        }),
        ..StorageSpec::default()
    });
    o.data_volumes.insert("m-root".into(), dv);
    let mut c = claim("m-root", Some("uid-m-root"), None);
    c.metadata.annotations = Some(BTreeMap::from([(
        CREATED_FOR_DATA_VOLUME.to_owned(),
        "uid-m-root".to_owned(),
    )]));
    c.spec = Some(k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
        resources: Some(k8s_openapi::api::core::v1::VolumeResourceRequirements {
            requests: Some(BTreeMap::from([(
                "storage".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("20Gi".into()),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    });
    o.claims.insert("m-root".into(), c.clone());
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let size = |dv: &DataVolume| {
        dv.spec
            .storage
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .map(|r| r.requests["storage"].clone())
    };
    assert_eq!(
        size(&d.data_volumes[0]),
        Some("20Gi".to_owned()),
        "the DataVolume keeps its size"
    );
    assert_eq!(d.grow_claims, [("m-root".to_owned(), "30Gi".to_owned())]);

    // Already grown (the server writes 30Gi as given): nothing more to do.
    if let Some(r) = c
        .spec
        .as_mut()
        .and_then(|s| s.resources.as_mut())
        .and_then(|r| r.requests.as_mut())
    {
        r.insert(
            "storage".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("30Gi".into()),
        );
    }
    o.claims.insert("m-root".into(), c.clone());
    assert!(
        decide(&o, &Catalog::default(), &key())
            .grow_claims
            .is_empty()
    );

    // Not grown (the disk is the DataVolume's size), whatever CDI's claim asks: nothing.
    let grown = o.data_volumes.get("m-root").cloned();
    let mut o = observed(imaged("m"));
    o.data_volumes
        .extend(grown.map(|dv| ("m-root".to_owned(), dv)));
    if let Some(r) = (c.spec.as_mut())
        .and_then(|s| s.resources.as_mut())
        .and_then(|r| r.requests.as_mut())
    {
        r.insert(
            "storage".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1Gi".into()),
        );
    }
    o.claims.insert("m-root".into(), c);
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert!(d.grow_claims.is_empty());
}

#[test]
fn retain_disks_releases_the_disks_data_volumes_not_the_cdroms() {
    let mut m = imaged("m");
    m.metadata.annotations = Some(BTreeMap::from([(
        RETAIN_DISKS_ANNOTATION.to_owned(),
        "true".to_owned(),
    )]));
    let d = decide(&observed(m), &Catalog::default(), &key());
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
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(
        d.delete_removed,
        [(
            Kind::DataVolume,
            "m-old-iso".to_owned(),
            "uid-m-old-iso".to_owned()
        )]
    );
    assert!(
        d.vm.is_some(),
        "deleted with the VM that no longer mounts it"
    );

    // A VM held back (here by a foreign DataVolume in the way) still mounts the CD-ROM: nothing
    // is deleted.
    o.data_volumes
        .insert("m-root".into(), data_volume("m-root", Some("uid-a"), None));
    let held = decide(&o, &Catalog::default(), &key());
    assert!(held.vm.is_none() && held.delete_removed.is_empty());
}

#[test]
fn without_cdi_only_machines_with_sources_wait() {
    let mut o = observed(imaged("m"));
    o.cdi_installed = false;
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(reasons(&d), ["CDINotInstalled"]);
    assert!(d.problems[0].to_string().contains("disk root, cdrom iso"));
    assert!(d.vm.is_none() && d.data_volumes.is_empty());

    let mut plain = observed(machine("p", json!({"template": "small"})));
    plain.cdi_installed = false;
    let d = decide(&plain, &Catalog::default(), &key());
    assert!(d.problems.is_empty() && d.vm.is_some());
}

#[test]
fn a_made_data_volume_keeps_the_source_it_was_made_from() {
    use crate::reconciler::apis::cdi::SourceRef;
    // Made before pinning (a sourceRef), now unpinned: no problem, nothing to change.
    let m = machine(
        "m",
        json!({"template": "small",
               "disks": [{"name": "root", "size": "20Gi", "source": {"dataSource": {"name": "d"}}}]}),
    );
    let mut o = observed(m);
    // Not made yet: none is made, and the Machine says why.
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(
        d.problems,
        [Problem::CloneSourceNotPinned {
            volume: "disk root".into()
        }]
    );
    assert!(d.data_volumes.is_empty());
    let mut dv = data_volume("m-root", Some(UID), Some("m"));
    dv.spec.source_ref = Some(SourceRef {
        kind: "DataSource".into(),
        name: "d".into(),
        namespace: Some("ns".into()),
    });
    o.data_volumes.insert("m-root".into(), dv.clone());
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(names(&d), ["m-root"]);
    assert_eq!(d.data_volumes[0].spec.source_ref, dv.spec.source_ref);
    // Pinned elsewhere since (the DataSource moved and the Machine was re-admitted): the
    // DataVolume still says what it was made from, which CDI would refuse to change.
    let mut m = o.machine.clone();
    m.metadata.annotations = Some(BTreeMap::from([(
        crate::api::names::CLONE_SOURCES_ANNOTATION.to_owned(),
        r#"{"root":{"pvc":{"namespace":"os","name":"newer"}}}"#.to_owned(),
    )]));
    o.machine = m;
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(names(&d), ["m-root"]);
    assert_eq!(d.data_volumes[0].spec.source_ref, dv.spec.source_ref);
    assert_eq!(d.data_volumes[0].spec.source, None);
}

#[test]
fn a_made_claim_keeps_its_modes_whatever_the_profile_says_now() {
    use crate::reconciler::decide::storage_defaults::{StorageDefaults, fill};
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
    // The class's profile now says ReadWriteMany/Block; the claim was made ReadWriteOnce.
    let defaults = StorageDefaults {
        default_class: Some("ceph".into()),
        profiles: BTreeMap::from([(
            "ceph".to_owned(),
            vec![crate::reconciler::apis::cdi::ClaimPropertySet {
                access_modes: vec!["ReadWriteMany".into()],
                volume_mode: Some("Block".into()),
            }],
        )]),
    };
    let mut o = observed(machine("m", json!({"template": "small"})));
    o.spec = fill(o.spec.clone(), &defaults);
    let d = decide(&o, &Catalog::default(), &key());
    let made = d.claims[0].spec.as_ref().expect("spec");
    assert_eq!(
        (made.access_modes.as_deref(), made.volume_mode.as_deref()),
        (Some(&["ReadWriteMany".to_owned()][..]), Some("Block")),
        "a new claim takes the profile's first set"
    );
    let mut live = claim("m-root", Some(UID), Some("m"));
    live.spec = Some(PersistentVolumeClaimSpec {
        access_modes: Some(vec!["ReadWriteOnce".into()]),
        volume_mode: Some("Filesystem".into()),
        ..Default::default()
    });
    o.claims.insert("m-root".into(), live);
    let d = decide(&o, &Catalog::default(), &key());
    let kept = d.claims[0].spec.as_ref().expect("spec");
    assert_eq!(
        (kept.access_modes.as_deref(), kept.volume_mode.as_deref()),
        (Some(&["ReadWriteOnce".to_owned()][..]), Some("Filesystem"))
    );
}

#[test]
fn a_data_volume_a_restore_made_again_keeps_its_clone_source() {
    use crate::reconciler::apis::cdi::{DataVolumeSource, PvcSource};
    // The spec imports over http; a MachineRestore made `m-root` again as a clone of the claim
    // KubeVirt restored. CDI refuses a change of its source, and one made anew would import the
    // image again over the restored data: it is kept as it is, ours, no conflict, not deleted.
    let mut o = observed(imaged("m"));
    let mut dv = data_volume("m-root", Some(UID), Some("m"));
    dv.spec.source = Some(DataVolumeSource {
        pvc: Some(PvcSource {
            namespace: "ns".into(),
            name: "m-root-restore-0a1b2c3d".into(),
        }),
        ..DataVolumeSource::default()
    });
    o.data_volumes.insert("m-root".into(), dv.clone());
    let mut cdis = claim("m-root", Some("uid-m-root"), None);
    cdis.metadata.annotations = Some(BTreeMap::from([(
        CREATED_FOR_DATA_VOLUME.to_owned(),
        "uid-m-root".to_owned(),
    )]));
    o.claims.insert("m-root".into(), cdis);
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(names(&d), ["m-root", "m-iso"]);
    assert_eq!(d.data_volumes[0].spec.source, dv.spec.source);
    assert!(d.delete_removed.is_empty());
    let vm = d.vm.expect("the VM");
    assert!(crate::reconciler::decide::held::mounted(&vm).contains(&"m-root"));
}
