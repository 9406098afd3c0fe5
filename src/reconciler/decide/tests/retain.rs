//! retain-disks through `decide`: what is released, what is adopted.

use super::*;

#[test]
fn retain_disks_releases_what_is_ours_and_adoptions_are_listed() {
    let mut m = machine("m", json!({"template": "small"}));
    m.metadata.annotations = Some(BTreeMap::from([(
        RETAIN_DISKS_ANNOTATION.to_owned(),
        "true".to_owned(),
    )]));
    let mut o = observed(m);
    o.claims
        .insert("m-root".into(), claim("m-root", Some(UID), Some("m")));
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.retain);
    let released: Vec<(&str, usize)> = (d.release.iter())
        .map(|r| (r.name.as_str(), r.owners.len()))
        .collect();
    assert_eq!(
        released,
        [("m-root", 0)],
        "its one reference, the Machine's, goes"
    );
    assert_eq!(d.claims[0].metadata.owner_references, None);
    assert!(d.adopting.is_empty());

    // Released by us for a Machine of this name that is gone: adopted, nothing to release.
    o.claims
        .insert("m-root".into(), claim("m-root", None, Some("m")));
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.release.is_empty());
    assert_eq!(d.adopting, [(Kind::Claim, "m-root".to_owned())]);

    // Without retain-disks nothing is released.
    let mut o = observed(machine("m", json!({"template": "small"})));
    o.claims
        .insert("m-root".into(), claim("m-root", Some(UID), Some("m")));
    let d = decide(&o, &Catalog::default(), &key());
    assert!(!d.retain && d.release.is_empty());
}
